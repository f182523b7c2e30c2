// The caching proxy behind `httpcache serve` is built by its own issue. This target exists
// so the package has the layout of DESIGN.md.
import HTTPCaching

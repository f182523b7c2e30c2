// The cache users hold (HTTPCache, the URLSession transport and URLProtocol) is built by the
// HTTPCaching issue. This target exists so the package has the layout of DESIGN.md.
import CacheSemantics
import CacheStorage

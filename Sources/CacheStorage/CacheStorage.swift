// The durable store (memory tier, SQLite index + body files) is built by the CacheStorage
// issue. This target exists so the package has the layout of DESIGN.md from the start.
import CacheSemantics

// SQLite for CacheStorage, from Debian's libsqlite3-dev. Macros and variadic functions that
// Swift cannot import are wrapped here.
#ifndef CSQLITE_HTTPCACHE_SHIM_H
#define CSQLITE_HTTPCACHE_SHIM_H

#include <sqlite3.h>

/// SQLITE_TRANSIENT: SQLite copies the bound bytes before the call returns.
static inline sqlite3_destructor_type csqlite_transient(void) { return SQLITE_TRANSIENT; }

#endif

// SQLite for CacheStorage, from Debian's libsqlite3-dev. Macros and variadic functions that
// Swift cannot import are wrapped here.
#ifndef CSQLITE_HTTPCACHE_SHIM_H
#define CSQLITE_HTTPCACHE_SHIM_H

#include <sqlite3.h>
#include <stdint.h>

/// SQLITE_TRANSIENT: SQLite copies the bound bytes before the call returns.
static inline sqlite3_destructor_type csqlite_transient(void) { return SQLITE_TRANSIENT; }

/// The change counter DiskStore shares between processes through a memory-mapped file: read
/// before a cached head is trusted, bumped after every index write (returning the count before).
static inline uint64_t csqlite_counter_load(const uint64_t *counter) {
    return __atomic_load_n(counter, __ATOMIC_ACQUIRE);
}
static inline uint64_t csqlite_counter_bump(uint64_t *counter) {
    return __atomic_fetch_add(counter, 1, __ATOMIC_ACQ_REL);
}

/// Whether closing the last connection checkpoints the WAL (and deletes it unless it is
/// persistent): `sqlite3_db_config(SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE)`, which is variadic.
static inline int csqlite_set_checkpoint_on_close(sqlite3 *db, int checkpoints) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, checkpoints ? 0 : 1, (int *)0);
}

/// Whether SQLite keeps memory statistics (`sqlite3_config(SQLITE_CONFIG_MEMSTATUS)`, which is
/// variadic): for the whole process, and taken only before SQLite's first use (SQLITE_MISUSE after).
static inline int csqlite_keep_memory_statistics(int keeps) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, keeps);
}

#endif

// Callgrind's client requests for the bench-count driver (scripts/bench-check), from the
// headers of Debian's valgrind package. Each request is a few no-op instructions that only
// valgrind gives a meaning to, so the driver runs natively too. Without the headers every
// function does nothing and httpcache_callgrind_headers() is 0.
#if defined(__has_include) && __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#include <valgrind/valgrind.h>
static inline int httpcache_callgrind_headers(void) { return 1; }
static inline unsigned httpcache_running_on_valgrind(void) { return RUNNING_ON_VALGRIND; }
// With --instr-atstart=no: instrument from here on (setup and warm-up ran uninstrumented).
static inline void httpcache_callgrind_start_instrumentation(void) { CALLGRIND_START_INSTRUMENTATION; }
static inline void httpcache_callgrind_stop_instrumentation(void) { CALLGRIND_STOP_INSTRUMENTATION; }
// With --collect-atstart=no: counts from here on, on the calling thread only (callgrind keeps
// the collection state per thread), until the next toggle.
static inline void httpcache_callgrind_toggle_collect(void) { CALLGRIND_TOGGLE_COLLECT; }
#else
static inline int httpcache_callgrind_headers(void) { return 0; }
static inline unsigned httpcache_running_on_valgrind(void) { return 0; }
static inline void httpcache_callgrind_start_instrumentation(void) {}
static inline void httpcache_callgrind_stop_instrumentation(void) {}
static inline void httpcache_callgrind_toggle_collect(void) {}
#endif

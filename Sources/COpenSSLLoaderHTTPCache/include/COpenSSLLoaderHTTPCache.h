// Whether OpenSSL can be had. On Linux, libssl and libcrypto are not linked: the functions of
// OpenSSL the package calls are defined in loader.c under their own names, and the first call
// of each opens the library that holds it (see there). Apple platforms link OpenSSL as before.
#ifndef COPENSSL_LOADER_HTTPCACHE_H
#define COPENSSL_LOADER_HTTPCACHE_H

/// NULL when libssl and libcrypto are loaded (opening them now if they are not yet), else one
/// line saying which file failed, why, and what to install. Apple platforms: always NULL.
const char *httpcache_openssl_unavailable(void);

#endif

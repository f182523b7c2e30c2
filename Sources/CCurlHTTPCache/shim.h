#ifndef CCURL_HTTPCACHE_SHIM_H
#define CCURL_HTTPCACHE_SHIM_H

#include <curl/curl.h>

// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: one typed
// wrapper per argument type. Each passes its argument with the type libcurl reads for that
// option class (long, curl_off_t, a pointer, a function pointer), as curl_easy_setopt(3) says.

/// An option whose argument is a `long` (CURLOPTTYPE_LONG, e.g. CURLOPT_NOSIGNAL).
static inline CURLcode httpcache_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

/// An option whose argument is a `curl_off_t` (CURLOPTTYPE_OFF_T, e.g. CURLOPT_POSTFIELDSIZE_LARGE).
static inline CURLcode httpcache_curl_setopt_off(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

/// An option whose argument is a string, an object or a data pointer (CURLOPTTYPE_STRINGPOINT,
/// CURLOPTTYPE_OBJECTPOINT, CURLOPTTYPE_SLISTPOINT, CURLOPTTYPE_CBPOINT).
static inline CURLcode httpcache_curl_setopt_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}

/// CURLOPT_WRITEFUNCTION: the response body, de-chunked.
static inline CURLcode httpcache_curl_set_write_function(CURL *handle, curl_write_callback function) {
    return curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, function);
}

/// CURLOPT_HEADERFUNCTION: every head line as received (interim responses included).
static inline CURLcode httpcache_curl_set_header_function(CURL *handle, curl_write_callback function) {
    return curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, function);
}

/// CURLOPT_XFERINFOFUNCTION: called while a transfer runs, at least about once a second.
static inline CURLcode httpcache_curl_set_xferinfo_function(CURL *handle, curl_xferinfo_callback function) {
    return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, function);
}

/// CURLOPT_PREREQFUNCTION (libcurl 7.80): called each time a request is about to be sent,
/// including when libcurl sends it again on a new connection.
static inline CURLcode httpcache_curl_set_prereq_function(CURL *handle, curl_prereq_callback function) {
    return curl_easy_setopt(handle, CURLOPT_PREREQFUNCTION, function);
}

/// An information item that is a `long` (CURLINFO_LONG, e.g. CURLINFO_OS_ERRNO).
static inline CURLcode httpcache_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

#endif

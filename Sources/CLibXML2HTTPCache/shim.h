// libxml2's HTML parser (htmlReadMemory, the tree it builds), for OfflinePages: which
// subresources a page needs. Debian: libxml2-dev; part of Apple's SDKs.
#ifndef CLIBXML2_HTTPCACHE_SHIM_H
#define CLIBXML2_HTTPCACHE_SHIM_H

#include <libxml/xmlversion.h>
// Debian builds libxml2 with ICU, and <libxml/encoding.h> then includes ICU's headers, which
// clash with the ICU that Foundation bundles on Linux. Only xmlCharEncodingHandler's layout
// depends on it, and Swift never touches that struct: libxml2 converts encodings itself.
#undef LIBXML_ICU_ENABLED
#include <libxml/HTMLparser.h>
#include <libxml/HTMLtree.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

// libxml2 reports some problems (encoding errors) through its generic error function even
// with HTML_PARSE_NOERROR, and that one writes to stderr; a function Swift cannot write (it is
// variadic) replaces it. The setting is per thread: call before each parse.
static void httpcache_libxml2_ignore(void *context, const char *message, ...) {
    (void)context;
    (void)message;
}
static inline void httpcache_libxml2_quiet(void) {
    xmlSetGenericErrorFunc(NULL, httpcache_libxml2_ignore);
}

#endif

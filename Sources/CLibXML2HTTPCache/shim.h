// libxml2's HTML parser (htmlReadMemory, the tree it builds), for OfflinePages: which
// subresources a page needs. Debian: libxml2-dev; part of Apple's SDKs.
//
// On Linux the library is not linked: OfflinePages opens it with dlopen the first time a page is
// parsed, so that a program linking OfflinePages (the httpcache CLI) does not load libxml2 and
// what Debian's build of it needs (ICU's 30 MB, liblzma, libstdc++) at every start. The headers
// give the types, and the types of the functions looked up. Apple's SDKs have libxml2 in the
// shared cache: there it is linked (OfflinePages' linker settings) and called directly.
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
#ifndef __APPLE__
#include <dlfcn.h>
#endif

// The libxml2 functions OfflinePages calls, typed as the headers declare them.
typedef struct {
    __typeof__(xmlInitParser) *initParser;
    __typeof__(htmlReadMemory) *readMemory;
    __typeof__(xmlDocGetRootElement) *rootElement;
    __typeof__(xmlFreeDoc) *freeDoc;
    __typeof__(xmlSetGenericErrorFunc) *setGenericErrorFunc;
} httpcache_libxml2;

// Fills `functions` from `file` (Linux: dlopen'd, RTLD_NOW | RTLD_LOCAL; Apple: linked, `file`
// unused) and initialises the parser. Returns NULL, or dlerror's text when the file cannot be
// opened or lacks a function. Call once per process: the library stays loaded.
static inline const char *httpcache_libxml2_load(const char *file, httpcache_libxml2 *functions) {
#ifdef __APPLE__
    (void)file;
    functions->initParser = xmlInitParser;
    functions->readMemory = htmlReadMemory;
    functions->rootElement = xmlDocGetRootElement;
    functions->freeDoc = xmlFreeDoc;
    functions->setGenericErrorFunc = xmlSetGenericErrorFunc;
#else
    void *library = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return dlerror();
#define HTTPCACHE_LIBXML2_FIND(field, name)                                                       \
    if ((functions->field = (__typeof__(functions->field))dlsym(library, name)) == NULL) return dlerror();
    HTTPCACHE_LIBXML2_FIND(initParser, "xmlInitParser")
    HTTPCACHE_LIBXML2_FIND(readMemory, "htmlReadMemory")
    HTTPCACHE_LIBXML2_FIND(rootElement, "xmlDocGetRootElement")
    HTTPCACHE_LIBXML2_FIND(freeDoc, "xmlFreeDoc")
    HTTPCACHE_LIBXML2_FIND(setGenericErrorFunc, "xmlSetGenericErrorFunc")
#undef HTTPCACHE_LIBXML2_FIND
#endif
    // libxml2 asks for it once, before threads parse at the same time.
    functions->initParser();
    return NULL;
}

// libxml2 reports some problems (encoding errors) through its generic error function even
// with HTML_PARSE_NOERROR, and that one writes to stderr; a function Swift cannot write (it is
// variadic) replaces it. The setting is per thread: call before each parse.
static void httpcache_libxml2_ignore(void *context, const char *message, ...) {
    (void)context;
    (void)message;
}
static inline void httpcache_libxml2_quiet(httpcache_libxml2 functions) {
    functions.setGenericErrorFunc(NULL, httpcache_libxml2_ignore);
}

#endif

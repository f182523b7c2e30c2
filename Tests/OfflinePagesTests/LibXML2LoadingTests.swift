import Testing

@testable import OfflinePages

/// libxml2 is opened when the first page is parsed (Linux), so a missing or wrong library is an
/// error that says what to do, never a crash.
@Suite("libxml2, loaded when a page is parsed")
struct LibXML2LoadingTests {
    #if os(Linux)
    @Test("A missing libxml2 is one line naming the file and how to install it")
    func missingLibrary() {
        let result = LibXML2.load("libxml2-absent.so.2")
        guard case .failure(let error) = result else {
            Issue.record("libxml2-absent.so.2 was loaded")
            return
        }
        #expect(error.loaderError.contains("libxml2-absent.so.2"), "\(error)")
        #expect(error.description.hasSuffix("install it with `apt-get install libxml2`"), "\(error)")
        #expect(!error.description.contains("\n"))
    }

    @Test("A library without libxml2's functions is refused, naming the function missing")
    func libraryWithoutTheFunctions() {
        guard case .failure(let error) = LibXML2.load("libz.so.1") else {
            Issue.record("zlib was taken for libxml2")
            return
        }
        #expect(error.loaderError.contains("xmlInitParser"), "\(error)")
    }
    #endif

    @Test("The installed libxml2 loads: the refusals above are not every load failing")
    func installedLibrary() throws {
        _ = try LibXML2.load(LibXML2.file).get()
    }
}

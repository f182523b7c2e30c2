import CacheStorage

/// `httpcache rekey`: the cache re-encrypted under a new key, in place.
struct RekeyCommand {
    static let name = "rekey"
    static let summary = "encrypt the cache under a new key (or for the first time, or decrypt it)"
    static let specs: [OptionSpec] = [
        .value("--cache-dir"), EncryptionKeyOption.spec, .value("--new-key-file"), .flag("--decrypt"),
    ]
    static let help = """
        Usage: httpcache rekey --new-key-file FILE [--encryption-key-file OLD] [--cache-dir DIR]
               httpcache rekey --decrypt --encryption-key-file OLD [--cache-dir DIR]

        Re-encrypts every stored response under the key in FILE: a cache in the clear (no
        --encryption-key-file, no $HTTPCACHE_ENCRYPTION_KEY_FILE) is encrypted, an encrypted one
        moves from its key (OLD) to the new one. With --decrypt the cache is written back in the
        clear. Stop `httpcache serve` and anything else using the cache first: they would read
        nothing of it afterwards.

        Crash-safe: every entry is written again beside the old one and one index transaction
        switches them; killed at any moment, the cache opens with the old key or the new one,
        with no entry lost, and opening it with the other one says which to give.

        Options:
          --new-key-file FILE         the new key: 32 bytes, or 64 hex digits
                                      (`openssl rand -hex 32 > FILE`)
          --decrypt                   write the cache back in the clear
          --encryption-key-file OLD   the cache's key now (default $HTTPCACHE_ENCRYPTION_KEY_FILE)
          --cache-dir DIR             the cache directory (default $HTTPCACHE_DIR, else
                                      ~/.cache/httpcache)
          -h, --help                  show this help
        """

    let directory: String
    let oldKey: EncryptionKey?
    let newKey: EncryptionKey?

    init(_ arguments: ParsedArguments) throws(Failure) {
        _ = try arguments.positionals("", minimum: 0, maximum: 0)
        let decrypt = arguments.has("--decrypt")
        guard decrypt != (arguments.value("--new-key-file") != nil) else {
            throw .usage(Self.name, "give either --new-key-file FILE or --decrypt")
        }
        directory = arguments.value("--cache-dir") ?? DiskStore.defaultDirectory()
        oldKey = try EncryptionKeyOption.key(arguments)
        newKey = try EncryptionKeyOption.key(arguments, option: "--new-key-file")
        if decrypt && oldKey == nil {
            throw .usage(Self.name, "--decrypt needs the cache's key: --encryption-key-file FILE")
        }
        if oldKey != nil && oldKey == newKey { throw .usage(Self.name, "the new key is the key the cache has") }
    }

    func run() throws(Failure) {
        var configuration = DiskStore.Configuration(directory: directory) { message in
            Console.error("httpcache: \(message)\n")
        }
        configuration.encryptionKey = oldKey
        let result: DiskStore.RekeyResult
        do {
            result = try DiskStore.rekey(configuration, to: newKey)
        } catch {
            throw Failure(
                .failure,
                "could not rekey the cache: \(error)"
                    + (error.kind == .encryption ? " (\(EncryptionKeyOption.given))" : "; the cache keeps its key"))
        }
        let dropped = result.dropped == 0 ? "" : " (\(result.dropped) that no longer read back were removed)"
        let next =
            newKey == nil
            ? "it is now in the clear: open it without a key"
            : "from now on give --encryption-key-file with the new key"
        Console.out("rekeyed \(result.entries) entries in \(directory)\(dropped); \(next)\n")
    }
}

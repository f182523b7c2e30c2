import CacheStorage
import CacheStorageRedis
import CacheSystem
import Foundation
import HTTPCacheCore

/// The options every subcommand that uses the cache accepts, and opening it.
struct CacheOptions: Sendable {
    /// The option specs: `--cache-dir DIR`, `--encryption-key-file FILE`, the Redis tier's.
    static let specs: [OptionSpec] = [.value("--cache-dir"), EncryptionKeyOption.spec] + RedisOptions.specs

    /// The cache directory: `--cache-dir`, else `$HTTPCACHE_DIR`, else the user's cache
    /// directory (`DiskStore.defaultDirectory()`).
    var directory: String
    /// The shared Redis tier, when asked for.
    var redis: RedisOptions
    /// `--cacert` files, for the commands that fetch (``Network/specs``).
    var trustedCertificateFiles: [String]
    /// The subcommand, for messages.
    var command: String
    /// The key of an encrypted cache (``EncryptionKeyOption``).
    var encryptionKey: EncryptionKey?

    init(_ arguments: ParsedArguments) throws(Failure) {
        redis = try RedisOptions(arguments)
        encryptionKey = try EncryptionKeyOption.key(arguments)
        redis.configuration?.encryptionKey = encryptionKey
        trustedCertificateFiles = arguments.all("--cacert")
        command = arguments.command
        if let given = arguments.value("--cache-dir") {
            guard !given.isEmpty else { throw .usage(arguments.command, "--cache-dir needs a directory") }
            directory = given
        } else {
            directory = DiskStore.defaultDirectory()
        }
    }

    /// Opens the cache in ``directory``.
    ///
    /// - Parameters:
    ///   - isShared: Whether it behaves as a shared cache (`--shared`).
    ///   - network: Whether it may fetch; when `false` (inspection commands) any fetch fails
    ///     instead of touching the network.
    /// - Throws: ``Failure`` with ``ExitCode/failure`` when the directory cannot be used, a
    ///   usage failure when a `--cacert` file cannot be used.
    func open(isShared: Bool = false, network: Bool = true) throws(Failure) -> HTTPCache {
        let transport: any OriginTransport =
            network ? try Network.transport(trusting: trustedCertificateFiles, command: command) : NoNetwork()
        var configuration = HTTPCache.Configuration()
        configuration.directory = directory
        configuration.isShared = isShared
        configuration.encryptionKey = encryptionKey
        configuration.log = { message in Console.error("httpcache: \(message)\n") }
        // Inspection commands read only the shared store: without Redis they have nothing to show.
        configuration.store = try redis.openStore(
            defaultLocalMemory: 0, listens: false, mustReach: !network, log: configuration.log)
        let failure = { (error: StorageError) in
            guard error.kind != .encryption else {
                return Failure(.failure, "could not open the cache: \(error) (\(EncryptionKeyOption.given))")
            }
            return Failure(
                .failure,
                "could not open the cache in \(directory): \(error)"
                    + (error.kind == .unsafeDirectory ? "; or" : "; check that it is a writable directory, or")
                    + " choose another with --cache-dir DIR or HTTPCACHE_DIR")
        }
        do {
            if configuration.store != nil {
                // Checked even when the store is Redis: the run's statistics are kept in it.
                configuration.directory = try DiskStore.prepareDirectory(directory)
            } else {
                // The disk store checks the directory itself as it opens (not twice, which cost
                // a hit some twenty system calls). It does not sweep its directory on a thread of
                // its own as it opens: the thread, and the one libdispatch starts beside it, cost
                // a hit more than its answer (5% of its CPU time, and two threads to wait for on a
                // busy machine); `get` sweeps after a run that may have written a body.
                configuration.store = try HTTPCache.store(configuration, diskSweepsWhenOpened: false)
            }
            return try HTTPCache(configuration: configuration, transport: transport)
        } catch {
            throw failure(error)
        }
    }
}

/// `--encryption-key-file FILE`, else `$HTTPCACHE_ENCRYPTION_KEY_FILE`: the key of an encrypted
/// cache (its disk store, and its Redis tier when there is one), for every command that opens
/// one and for `serve`.
enum EncryptionKeyOption {
    static let spec = OptionSpec.value("--encryption-key-file")
    /// How a key is given, for messages.
    static let given = "a key is given with --encryption-key-file FILE or $HTTPCACHE_ENCRYPTION_KEY_FILE"
    /// The key in the file `option` names (else, for the default option, the one
    /// `$HTTPCACHE_ENCRYPTION_KEY_FILE` names); `nil` when neither is given.
    /// - Throws: ``Failure`` with ``ExitCode/failure`` when the file cannot be read or holds no key.
    static func key(_ arguments: ParsedArguments, option: String = "--encryption-key-file") throws(Failure)
        -> EncryptionKey?
    {
        // An empty variable is as good as none.
        let environment =
            option == spec.names[0]
            ? FileDescriptor.environment("HTTPCACHE_ENCRYPTION_KEY_FILE").flatMap { $0.isEmpty ? nil : $0 } : nil
        guard let path = arguments.value(option) ?? environment else { return nil }
        guard !path.isEmpty else { throw .usage(arguments.command, "\(option) needs a file") }
        do {
            return try EncryptionKey(contentsOfFile: path) { warning in
                Console.error("httpcache: warning: \(warning)\n")
            }
        } catch {
            throw Failure(.failure, "\(arguments.command): \(error)")
        }
    }
}

extension HTTPCache {
    /// Writes buffered access times (hit counts) to the index now: a short-lived process must
    /// not rely on the store being released before it exits.
    func flushToDisk() {
        guard let tiered = store as? TieredStore else { return }
        do {
            try tiered.disk.flush()
        } catch {
            Console.error("httpcache: could not record access times in the cache index: \(error)\n")
        }
    }
}

extension HTTPCache {
    /// Sweeps the disk store's directory on a background thread (``DiskStore/sweep()``), as
    /// opening it would have (the tool opens it without: ``CacheOptions/open(isShared:network:)``):
    /// after a run that may have written a body, or been cut off while writing one.
    func sweepInBackground() {
        guard let tiered = store as? TieredStore else { return }
        let disk = tiered.disk
        DispatchQueue.global(qos: .utility).async { disk.sweep() }
    }
}

/// The transport of inspection commands (`ls`, `show`, `purge`, `pin`, `unpin`, `stats`): they
/// never fetch, and this makes sure of it.
struct NoNetwork: OriginTransport {
    func send(_ request: FetchRequest) async throws -> OriginResponse {
        throw URLError(.notConnectedToInternet)
    }
}

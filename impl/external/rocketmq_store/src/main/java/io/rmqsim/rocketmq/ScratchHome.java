package io.rmqsim.rocketmq;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;

/**
 * Where RocketMQ may write beside the store: a home directory of this JVM's own, under
 * {@code java.io.tmpdir}, emptied as soon as the store has started.
 *
 * <p>RocketMQ writes under {@code user.home}: the RocksDB store that
 * {@code DefaultMessageStore}'s constructor always opens ({@code rocksdbstore/}, unused by
 * this driver) logs to {@code ConfigHelper.getDBLogDir()} = {@code user.home/logs/rocketmqlogs/}
 * (rocketmq-common 5.5.1, used by {@code RocksDBOptionsFactory.createDBOptions()}; no setting
 * for it), one file per store path, never removed: about 10,000 files, 469 MB, in the
 * account's home after a day of sweeps. Not in the store's directory either: a power-cut
 * sweep runs that directory on a simulated disk, and the log's writes would be cut points
 * of their own (the sweep's cases are the store's writes).
 *
 * <p>{@link #enter} points {@code user.home} at {@code java.io.tmpdir/rmqsim-rocketmq-home-PID},
 * first removing those of processes no longer alive (a JVM killed before {@link #leave});
 * {@link #leave} removes this JVM's: RocksDB keeps appending to the log it holds open (an
 * unlinked file, freed when it is closed or the process ends). RocketMQ's log rolls at
 * 1 GB, never in a driver's life.
 */
final class ScratchHome {
    private static final String PREFIX = "rmqsim-rocketmq-home-";

    private ScratchHome() {
    }

    /** This JVM's scratch home, created and made {@code user.home}. */
    static Path enter() throws IOException {
        Path tmp = Path.of(System.getProperty("java.io.tmpdir"));
        long self = ProcessHandle.current().pid();
        removeStale(tmp, self);
        Path home = tmp.resolve(PREFIX + self);
        Files.createDirectories(home);
        System.setProperty("user.home", home.toString());
        return home;
    }

    /** Remove {@code home} and what is in it (files RocketMQ holds open stay usable). */
    static void leave(Path home) {
        deleteTree(home);
    }

    private static void removeStale(Path tmp, long self) {
        try (DirectoryStream<Path> homes = Files.newDirectoryStream(tmp, PREFIX + "*")) {
            for (Path home : homes) {
                long pid;
                try {
                    pid = Long.parseLong(home.getFileName().toString().substring(PREFIX.length()));
                } catch (NumberFormatException notOurs) {
                    continue;
                }
                boolean alive = ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false);
                if (pid != self && !alive) {
                    deleteTree(home);
                }
            }
        } catch (IOException unreadable) {
            // another JVM's removal raced ours, or no tmpdir listing: nothing to clean here
        }
    }

    private static void deleteTree(Path root) {
        try (Stream<Path> walk = Files.walk(root)) {
            walk.sorted(Comparator.reverseOrder()).forEach(path -> {
                try {
                    Files.deleteIfExists(path);
                } catch (IOException busy) {
                    // removed by another JVM's clean-up meanwhile, or not ours to remove
                }
            });
        } catch (IOException gone) {
            // already removed
        }
    }
}

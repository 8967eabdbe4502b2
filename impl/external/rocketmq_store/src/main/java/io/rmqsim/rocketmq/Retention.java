package io.rmqsim.rocketmq;

import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.store.CommitLog;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.SelectMappedBufferResult;
import org.apache.rocketmq.store.logfile.MappedFile;

/**
 * retain(cutoff): RocketMQ deletes a commit-log file when its mtime is older than
 * fileReservedTime hours of System.currentTimeMillis(). The driver reads the simulated put
 * time of every message back from the log (its born timestamp), back-dates the mtime of
 * the leading files all of whose messages were put before the cutoff, dates the others
 * now, and runs the store's own clean-ups: the commit log's (as a manual delete), then the
 * consume queues' (which delete their files and correct each queue's min offset).
 */
final class Retention {
    private static final long HOUR_MS = 3_600_000L;

    private final DefaultMessageStore store;
    private final Bug bug;
    private final Points points;
    /** Latest born time (ms) of each full commit-log file, by its start offset. */
    private final Map<Long, Long> latestBorn = new HashMap<>();

    Retention(DefaultMessageStore store, Bug bug, Points points) {
        this.store = store;
        this.bug = bug;
        this.points = points;
    }

    static long secondsToMillis(long seconds) {
        long limit = Long.MAX_VALUE / 1000;
        return Math.max(-limit, Math.min(limit, seconds)) * 1000;
    }

    void retain(long cutoffSeconds) throws Exception {
        List<MappedFile> files = store.getCommitLog().getMappedFileQueue().getMappedFiles();
        long cutoffMillis = secondsToMillis(cutoffSeconds);
        long wall = System.currentTimeMillis();
        boolean expired = true;
        for (int i = 0; i < files.size() - 1; i++) { // never the last file: RocketMQ's rule too
            MappedFile file = files.get(i);
            expired = expired && latestBorn(file) < cutoffMillis;
            long reserved = (Settings.FILE_RESERVED_HOURS + 1) * HOUR_MS;
            file.getFile().setLastModified(expired ? wall - reserved : wall);
        }
        points.at("retain.before_delete");
        cleanCommitLog();
        points.at("retain.after_delete");
        cleanConsumeQueues();
    }

    private long latestBorn(MappedFile file) {
        return latestBorn.computeIfAbsent(file.getFileFromOffset(), from -> scan(file));
    }

    /** The latest born timestamp of the messages in a (full) file; MIN_VALUE if it has none. */
    private static long scan(MappedFile file) {
        long latest = Long.MIN_VALUE;
        SelectMappedBufferResult data = file.selectMappedBuffer(0);
        if (data == null) {
            return latest;
        }
        try {
            ByteBuffer buffer = data.getByteBuffer();
            while (buffer.remaining() >= 8) {
                int start = buffer.position();
                int size = buffer.getInt(start);
                if (size <= 0 || size > buffer.remaining() || buffer.getInt(start + 4) == CommitLog.BLANK_MAGIC_CODE) {
                    break;
                }
                ByteBuffer record = buffer.slice(start, size);
                MessageExt msg = MessageDecoder.decode(record, false, false);
                if (msg == null) {
                    break;
                }
                latest = Math.max(latest, msg.getBornTimestamp());
                buffer.position(start + size);
            }
        } finally {
            data.release();
        }
        return latest;
    }

    /** The store's CleanCommitLogService, run once as a manual delete (one pass). */
    private void cleanCommitLog() throws Exception {
        if (bug == Bug.RETAIN_FORCIBLY) {
            // The disk-full path: cleanImmediately deletes every file but the last, whatever its age.
            store.getCommitLog().deleteExpiredFile(Settings.FILE_RESERVED_HOURS * HOUR_MS, 0,
                    store.getMessageStoreConfig().getDestroyMapedFileIntervalForcibly(), true, Integer.MAX_VALUE);
            return;
        }
        Object service = Extensions.field(store, "cleanCommitLogService");
        Method times = service.getClass().getDeclaredMethod("setManualDeleteFileSeveralTimes", int.class);
        times.setAccessible(true);
        times.invoke(service, 1);
        Method run = service.getClass().getDeclaredMethod("run");
        run.setAccessible(true);
        run.invoke(service);
        times.invoke(service, 0);
    }

    /**
     * ConsumeQueueStore.cleanQueueFilesPeriodically, on the store's own single clean-queue
     * thread (so it never overlaps the periodic run) and waited for.
     */
    private void cleanConsumeQueues() throws Exception {
        Object queues = store.getQueueStore();
        Method clean = queues.getClass().getDeclaredMethod("cleanQueueFilesPeriodically");
        clean.setAccessible(true);
        Future<?> done = store.getScheduledCleanQueueExecutorService().submit(() -> {
            clean.invoke(queues);
            return null;
        });
        done.get(60, TimeUnit.SECONDS);
    }
}

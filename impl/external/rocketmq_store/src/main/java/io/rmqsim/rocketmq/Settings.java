package io.rmqsim.rocketmq;

import java.io.File;
import org.apache.rocketmq.store.config.FlushDiskType;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/** The RocketMQ settings the driver opens a store with (README.md "Settings" says why). */
final class Settings {
    /** Hours a commit-log file is kept after its mtime; retention back-dates past it. */
    static final int FILE_RESERVED_HOURS = 1;
    /** Entries per consume-queue file (RocketMQ's default is 300,000). */
    static final int CQ_ENTRIES_PER_FILE = 1024;
    private static final int DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024;
    /** "Never" for RocketMQ's millisecond intervals and page counts. */
    private static final int NEVER = Integer.MAX_VALUE;

    private Settings() {
    }

    static MessageStoreConfig build(String path, Args.OpenConfig open, Bug bug) {
        MessageStoreConfig c = new MessageStoreConfig();
        c.setStorePathRootDir(path);
        c.setStorePathCommitLog(path + File.separator + "commitlog");
        c.setMappedFileSizeCommitLog(open.segmentBytes);
        c.setMappedFileSizeConsumeQueue(CQ_ENTRIES_PER_FILE * 20);
        // RocketMQ's default (4 MiB), or more when a body of max_body_bytes with its header,
        // topic and properties needs it. (The encoder holds a direct buffer of this size.)
        c.setMaxMessageSize(Math.max(DEFAULT_MAX_MESSAGE_SIZE, saturatedAdd(open.maxBodyBytes, 4096)));
        boolean sync = open.sync && bug != Bug.FLUSH_LIES;
        c.setFlushDiskType(sync ? FlushDiskType.SYNC_FLUSH : FlushDiskType.ASYNC_FLUSH);
        quietBackgroundFlushes(c);
        quietCleaning(c);
        // Gets: the same limits whether RocketMQ guesses the data is in memory or on disk.
        c.setMaxTransferCountOnMessageInMemory(NEVER);
        c.setMaxTransferCountOnMessageInDisk(NEVER);
        c.setMaxTransferBytesOnMessageInMemory(NEVER);
        c.setMaxTransferBytesOnMessageInDisk(NEVER);
        // Not the store's contract: the key index (a 420 MB sparse file), compaction, HA's port.
        c.setMessageIndexEnable(false);
        c.setEnableCompaction(false);
        c.setHaListenPort(0);
        return c;
    }

    /**
     * Under ASYNC_FLUSH only a flush request (or a full file, or the kernel) makes data
     * durable: the commit-log flush thread waits to be woken (a put wakes it) and then flushes
     * only files that are full; the consume-queue flush thread likewise.
     */
    private static void quietBackgroundFlushes(MessageStoreConfig c) {
        c.setFlushCommitLogTimed(false);
        c.setFlushIntervalCommitLog(NEVER);
        c.setFlushCommitLogLeastPages(NEVER);
        c.setFlushCommitLogThoroughInterval(NEVER);
        c.setFlushIntervalConsumeQueue(NEVER);
        c.setFlushConsumeQueueLeastPages(NEVER);
        c.setFlushConsumeQueueThoroughInterval(NEVER);
    }

    /** Files are deleted only by a retain request, never by the hour, disk fullness or force. */
    private static void quietCleaning(MessageStoreConfig c) {
        c.setFileReservedTime(FILE_RESERVED_HOURS);
        c.setDeleteWhen("99");
        c.setCleanResourceInterval(NEVER);
        c.setCleanFileForciblyEnable(false);
        c.setDeleteCommitLogFilesInterval(0);
        c.setDeleteConsumeQueueFilesInterval(0);
        c.setDeleteFileBatchMax(NEVER);
    }

    private static int saturatedAdd(int a, int b) {
        long sum = (long) a + b;
        return sum > Integer.MAX_VALUE ? Integer.MAX_VALUE : (int) sum;
    }
}

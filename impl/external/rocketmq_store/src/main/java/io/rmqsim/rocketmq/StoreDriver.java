package io.rmqsim.rocketmq;

import java.io.File;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.LockSupport;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageExtBatch;
import org.apache.rocketmq.common.message.MessageExtBrokerInner;
import org.apache.rocketmq.store.AppendMessageResult;
import org.apache.rocketmq.store.AppendMessageStatus;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.GetMessageResult;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.PutMessageStatus;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

/** One open store: RocketMQ's DefaultMessageStore and the operations of the store layer. */
final class StoreDriver {
    /** How long a put waits for the consume queue to catch up before it gives up. */
    private static final long DISPATCH_WAIT_NANOS = 10_000_000_000L;
    private static final String GROUP = "rmqsim";
    private static final InetSocketAddress HOST = new InetSocketAddress(InetAddress.getLoopbackAddress(), 0);

    final DefaultMessageStore store;
    private final Bug bug;
    private final Points points;
    private final Retention retention;

    private StoreDriver(DefaultMessageStore store, Bug bug, Points points) {
        this.store = store;
        this.bug = bug;
        this.points = points;
        this.retention = new Retention(store, bug, points);
    }

    static StoreDriver open(String path, Args.OpenConfig config, Bug bug, Points points) throws Exception {
        File dir = new File(path);
        if (!dir.isDirectory() && !dir.mkdir()) {
            throw DriverError.unexpected("IOException", "cannot create the store directory " + path);
        }
        java.nio.file.Path home = ScratchHome.enter(); // RocketMQ writes under user.home
        DefaultMessageStore store;
        try {
            MessageStoreConfig settings = Settings.build(dir.getAbsolutePath(), config, bug);
            store = new DefaultMessageStore(settings, new BrokerStatsManager("rmqsim", false),
                    null, new BrokerConfig(), new ConcurrentHashMap<>());
            Extensions.install(store, bug, points);
            if (!store.load()) {
                throw DriverError.unexpected("LoadFailed", "DefaultMessageStore.load() returned false (stderr has RocketMQ's reason)");
            }
            store.start();
        } finally {
            ScratchHome.leave(home);
        }
        return new StoreDriver(store, bug, points);
    }

    long put(String topic, int queue, List<byte[]> bodies, long nowSeconds) throws DriverError {
        long bornMillis = Retention.secondsToMillis(nowSeconds);
        PutMessageResult result = bodies.size() == 1
                ? store.putMessage(single(topic, queue, bodies.get(0), bornMillis))
                : store.putMessages(batch(topic, queue, bodies, bornMillis));
        AppendMessageResult appended = checked(result);
        points.at("put.after_append");
        awaitDispatch();
        return appended.getLogicsOffset();
    }

    private static MessageExtBrokerInner single(String topic, int queue, byte[] body, long bornMillis) {
        MessageExtBrokerInner msg = new MessageExtBrokerInner();
        address(msg, topic, queue, bornMillis);
        msg.setBody(body);
        msg.setWaitStoreMsgOK(true); // as a producer's Message(topic, body) has it, batch items too
        msg.setPropertiesString(MessageDecoder.messageProperties2String(msg.getProperties()));
        return msg;
    }

    private static MessageExtBatch batch(String topic, int queue, List<byte[]> bodies, long bornMillis) {
        List<Message> messages = new ArrayList<>();
        for (byte[] body : bodies) {
            messages.add(new Message(topic, body));
        }
        MessageExtBatch batch = new MessageExtBatch();
        address(batch, topic, queue, bornMillis);
        batch.setBody(MessageDecoder.encodeMessages(messages));
        return batch;
    }

    /** The born timestamp carries the simulated clock: retention reads it back from the log. */
    private static void address(MessageExtBrokerInner msg, String topic, int queue, long bornMillis) {
        msg.setTopic(topic);
        msg.setQueueId(queue);
        msg.setSysFlag(0);
        msg.setBornTimestamp(bornMillis);
        msg.setBornHost(HOST);
        msg.setStoreHost(HOST);
    }

    private static AppendMessageResult checked(PutMessageResult result) throws DriverError {
        if (result == null) {
            throw DriverError.unexpected("PutMessageResult", "the store returned no result");
        }
        AppendMessageResult appended = result.getAppendMessageResult();
        if (result.getPutMessageStatus() != PutMessageStatus.PUT_OK) {
            throw DriverError.unexpected("PutMessageStatus", result.getPutMessageStatus()
                    + (appended == null ? "" : " (append " + appended.getStatus() + ")"));
        }
        if (appended == null || appended.getStatus() != AppendMessageStatus.PUT_OK) {
            // RocketMQ answers PUT_OK for a message that does not fit an empty file (README).
            throw DriverError.unexpected("AppendMessageStatus", "PUT_OK with append status "
                    + (appended == null ? "null" : appended.getStatus()) + ": nothing was written");
        }
        return appended;
    }

    /** Until the reput thread has dispatched everything in the commit log (a bounded wait). */
    private void awaitDispatch() throws DriverError {
        long deadline = System.nanoTime() + DISPATCH_WAIT_NANOS;
        while (store.dispatchBehindBytes() > 0) {
            if (System.nanoTime() - deadline > 0) {
                throw DriverError.unexpected("DispatchTimeout", "the consume queue is still "
                        + store.dispatchBehindBytes() + " bytes behind the commit log after 10 s");
            }
            LockSupport.parkNanos(20_000);
        }
    }

    List<String> get(String topic, int queue, long offset, long maxCount) throws DriverError {
        int count = (int) Math.min(maxCount, Integer.MAX_VALUE);
        GetMessageResult result = store.getMessage(GROUP, topic, queue, offset, count, null);
        if (result == null) {
            throw DriverError.unexpected("GetMessageResult", "the store returned no result (not readable)");
        }
        List<String> bodies = new ArrayList<>();
        try {
            for (ByteBuffer buffer : result.getMessageBufferList()) {
                MessageExt msg = MessageDecoder.decode(buffer, true, false);
                if (msg == null) {
                    throw DriverError.unexpected("MessageDecoder", "a stored message did not decode");
                }
                byte[] body = msg.getBody() == null ? new byte[0] : msg.getBody();
                bodies.add(java.util.Base64.getEncoder().encodeToString(body));
            }
        } finally {
            result.release();
        }
        return bodies;
    }

    List<Long> offsets(String topic, int queue) throws Exception {
        long min = store.getMinOffsetInQueue(topic, queue);
        long max = store.getMaxOffsetInQueue(topic, queue);
        return List.of(min, max);
    }

    /** Commit log first (until its flushed position reaches its end), then the consume queues. */
    void flush() throws Exception {
        if (bug == Bug.FLUSH_LIES) {
            return;
        }
        long end = store.getCommitLog().getMaxOffset();
        int files = store.getCommitLog().getMappedFileQueue().getMappedFiles().size();
        for (int i = 0; store.getCommitLog().getFlushedWhere() < end; i++) {
            if (i > files + 2) {
                throw DriverError.unexpected("FlushIncomplete", "the commit log is flushed to "
                        + store.getCommitLog().getFlushedWhere() + " of " + end);
            }
            store.flush();
        }
        store.getQueueStore().flush();
    }

    void retain(long cutoffSeconds) throws Exception {
        retention.retain(cutoffSeconds);
    }

    void close(boolean fast) throws DriverError {
        if (fast) {
            Extensions.skipShutdownSleep(store);
        }
        store.shutdown();
        Thread.interrupted();
        String abort = store.getMessageStoreConfig().getStorePathRootDir() + File.separator + "abort";
        if (new File(abort).exists()) {
            throw DriverError.unexpected("ShutdownAbnormal", "RocketMQ kept its abort file: the next open recovers abnormally");
        }
    }
}

package io.rmqsim.rocketmq;

import java.lang.reflect.Field;
import java.util.List;
import java.util.ListIterator;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.store.CommitLogDispatcher;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.DispatchRequest;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.hook.PutMessageHook;
import org.rocksdb.RocksDBException;

/**
 * What the driver adds to a store through RocketMQ's own extension points: a put hook that
 * announces the fault point before the commit-log append, the seeded dispatcher bug, and
 * the quiet shutdown (no fixed 3 s sleep; README.md "close").
 */
final class Extensions {
    private Extensions() {
    }

    static void install(DefaultMessageStore store, Bug bug, Points points) {
        store.getPutMessageHookList().add(new PutMessageHook() {
            @Override
            public String hookName() {
                return "rmqsim-fault-point";
            }

            @Override
            public PutMessageResult executeBeforePutMessage(MessageExt msg) {
                points.at("put.before_append");
                return null;
            }
        });
        if (bug == Bug.CQ_DROP) {
            replaceConsumeQueueBuilder(store.getDispatcherList());
        }
    }

    /** Wraps RocketMQ's CommitLogDispatcherBuildConsumeQueue (the list is the store's own). */
    private static void replaceConsumeQueueBuilder(List<CommitLogDispatcher> dispatchers) {
        for (ListIterator<CommitLogDispatcher> it = dispatchers.listIterator(); it.hasNext(); ) {
            CommitLogDispatcher dispatcher = it.next();
            if (dispatcher.getClass().getSimpleName().equals("CommitLogDispatcherBuildConsumeQueue")) {
                it.set(new DroppingDispatcher(dispatcher));
                return;
            }
        }
        throw new IllegalStateException("no CommitLogDispatcherBuildConsumeQueue in the dispatcher list");
    }

    /** Bug cq-drop: the entry of every message whose queue offset is 4 mod 5 is never written. */
    static final class DroppingDispatcher implements CommitLogDispatcher {
        private final CommitLogDispatcher delegate;

        DroppingDispatcher(CommitLogDispatcher delegate) {
            this.delegate = delegate;
        }

        @Override
        public void dispatch(DispatchRequest request) throws RocksDBException {
            if (request.getConsumeQueueOffset() % 5 == 4) {
                return;
            }
            delegate.dispatch(request);
        }
    }

    /**
     * DefaultMessageStore.shutdown() awaits its two scheduled executors, then sleeps 3 s
     * unconditionally. Done here first, the awaits return at once; an interrupt flag set on
     * this thread then ends the sleep at once (RocketMQ catches and logs it) and the rest of
     * shutdown runs as always. The caller clears the flag afterwards.
     */
    static void skipShutdownSleep(DefaultMessageStore store) {
        try {
            quiesce(store.getScheduledCleanQueueExecutorService());
            quiesce((ExecutorService) field(store, "scheduledExecutorService"));
        } catch (ReflectiveOperationException | InterruptedException e) {
            System.err.println("rmqsim: cannot stop RocketMQ's schedulers first (" + e + "); shutdown sleeps 3 s");
            return;
        }
        System.err.println("rmqsim: schedulers stopped; interrupting shutdown's fixed 3 s sleep"
                + " (RocketMQ logs it as 'shutdown Exception')");
        Thread.currentThread().interrupt();
    }

    private static void quiesce(ExecutorService executor) throws InterruptedException {
        executor.shutdown();
        if (!executor.awaitTermination(3, TimeUnit.SECONDS)) {
            throw new InterruptedException("a scheduled task is still running after 3 s");
        }
    }

    static Object field(Object target, String name) throws ReflectiveOperationException {
        Field field = target.getClass().getDeclaredField(name);
        field.setAccessible(true);
        return field.get(target);
    }
}

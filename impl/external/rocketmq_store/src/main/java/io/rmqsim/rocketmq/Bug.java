package io.rmqsim.rocketmq;

import java.util.StringJoiner;

/**
 * The seeded bugs (README.md "Seeded bugs"), chosen with {@code --bug NAME}. Each goes in
 * through one of RocketMQ's own extension points or its public API; RocketMQ's code is never
 * changed.
 */
enum Bug {
    NONE("none"),
    /** The consume-queue dispatcher is wrapped: every 5th entry of a queue is never written. */
    CQ_DROP("cq-drop"),
    /** Asked for sync flush, the store is opened with ASYNC_FLUSH, and flush does nothing. */
    FLUSH_LIES("flush-lies"),
    /** Retention deletes through the store's forced clean-up (disk-full mode): every file but the last. */
    RETAIN_FORCIBLY("retain-forcibly");

    final String option;

    Bug(String option) {
        this.option = option;
    }

    static Bug named(String name) {
        for (Bug bug : values()) {
            if (bug.option.equals(name)) {
                return bug;
            }
        }
        return null;
    }

    static String known() {
        StringJoiner names = new StringJoiner(", ");
        for (Bug bug : values()) {
            if (bug != NONE) {
                names.add(bug.option);
            }
        }
        return names.toString();
    }
}

package io.rmqsim.rocketmq;

/** Where the driver announces a fault point of the request being served. */
interface Points {
    void at(String name);

    /** The protocol broke while waiting at a point (no go_on, end of input): stop serving. */
    final class Broken extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Broken(String message) {
            super(message);
        }
    }
}

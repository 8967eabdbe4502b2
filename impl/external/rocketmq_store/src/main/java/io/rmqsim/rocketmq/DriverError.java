package io.rmqsim.rocketmq;

import java.lang.reflect.InvocationTargetException;
import java.util.concurrent.ExecutionException;

/** An error reply: {@code {"kind", "message"}}, plus {@code "type"} for {@code Unexpected}. */
final class DriverError extends Exception {
    private static final long serialVersionUID = 1L;

    final String kind;
    final String type;

    private DriverError(String kind, String type, String message) {
        super(message);
        this.kind = kind;
        this.type = type;
    }

    static DriverError invalid(String message) {
        return new DriverError("InvalidArgument", null, message);
    }

    static DriverError notServing(String message) {
        return new DriverError("NotServing", null, message);
    }

    /** A failure of RocketMQ (or of the driver) that the contract never gives. */
    static DriverError unexpected(String type, String message) {
        return new DriverError("Unexpected", type, message);
    }

    static DriverError of(Throwable t) {
        while ((t instanceof InvocationTargetException || t instanceof ExecutionException) && t.getCause() != null) {
            t = t.getCause(); // reflection and the clean-queue thread wrap what RocketMQ threw
        }
        if (t instanceof DriverError) {
            return (DriverError) t;
        }
        String message = t.getMessage() == null ? t.toString() : t.getMessage();
        return unexpected(t.getClass().getSimpleName(), message);
    }
}

package io.rmqsim.rocketmq;

import com.alibaba.fastjson2.JSONArray;
import com.alibaba.fastjson2.JSONObject;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.regex.Pattern;

/**
 * A request's arguments, checked in the contract's order (the address, then the rest) and
 * turned into Java values. Every refusal is {@code InvalidArgument}.
 */
final class Args {
    /** RocketMQ's TopicValidator: {@code ^[%|a-zA-Z0-9_-]+$}, at most 127 characters. */
    private static final Pattern TOPIC = Pattern.compile("[A-Za-z0-9_%|-]{1,127}");

    private final JSONObject request;

    Args(JSONObject request) {
        this.request = request;
    }

    String topic() throws DriverError {
        Object value = request.get("topic");
        if (!(value instanceof String)) {
            throw DriverError.invalid("topic must be a string, got " + typeName(value));
        }
        String topic = (String) value;
        if (!TOPIC.matcher(topic).matches()) {
            String shown = topic.length() > 80 ? topic.substring(0, 80) + "..." : topic;
            throw DriverError.invalid("topic must be 1..127 of [A-Za-z0-9_%|-]: '" + shown + "'");
        }
        return topic;
    }

    /** A queue id: an integer >= 0; RocketMQ's queue ids are Java ints. */
    int queue() throws DriverError {
        long queue = integer("queue", 0);
        if (queue > Integer.MAX_VALUE) {
            throw DriverError.invalid("queue " + queue + " is over 2^31-1 (RocketMQ's queue ids are ints)");
        }
        return (int) queue;
    }

    /** An integer >= least; one beyond a long is clamped to a long (beyond every offset). */
    long integer(String name, long least) throws DriverError {
        Object value = request.get(name);
        if (!(value instanceof Number) || !isInteger((Number) value)) {
            throw DriverError.invalid(name + " must be an integer >= " + least + ", got " + typeName(value));
        }
        long number = clamp((Number) value);
        if (number < least) {
            throw DriverError.invalid(name + " must be an integer >= " + least + ": " + number);
        }
        return number;
    }

    /** The bodies of a put: a non-empty list of base64 strings, each at most maxBytes decoded. */
    List<byte[]> bodies(int maxBytes) throws DriverError {
        Object value = request.get("bodies");
        if (!(value instanceof JSONArray) || ((JSONArray) value).isEmpty()) {
            throw DriverError.invalid("bodies must be a non-empty list of base64 strings");
        }
        List<byte[]> bodies = new ArrayList<>();
        JSONArray items = (JSONArray) value;
        for (int i = 0; i < items.size(); i++) {
            if (!(items.get(i) instanceof String)) {
                throw DriverError.invalid("bodies[" + i + "] must be a base64 string, got " + typeName(items.get(i)));
            }
            byte[] body;
            try {
                body = Base64.getDecoder().decode((String) items.get(i));
            } catch (IllegalArgumentException e) {
                throw DriverError.invalid("bodies[" + i + "] is not base64: " + e.getMessage());
            }
            if (body.length > maxBytes) {
                throw DriverError.invalid("bodies[" + i + "] is " + body.length + " bytes, over " + maxBytes);
            }
            bodies.add(body);
        }
        return bodies;
    }

    /** The open request's {@code config}. */
    OpenConfig config() throws DriverError {
        Object value = request.get("config");
        if (!(value instanceof JSONObject)) {
            throw DriverError.invalid("config must be an object, got " + typeName(value));
        }
        Args config = new Args((JSONObject) value);
        Object flush = ((JSONObject) value).get("flush");
        if (!"sync".equals(flush) && !"async".equals(flush)) {
            throw DriverError.invalid("config.flush must be \"sync\" or \"async\", got " + flush);
        }
        long segment = config.integer("segment_bytes", 1);
        long maxBody = config.integer("max_body_bytes", 1);
        if (segment > Integer.MAX_VALUE || maxBody > Integer.MAX_VALUE) {
            throw DriverError.invalid("segment_bytes and max_body_bytes must fit a Java int");
        }
        return new OpenConfig("sync".equals(flush), (int) segment, (int) maxBody);
    }

    String path() throws DriverError {
        Object value = request.get("path");
        if (!(value instanceof String) || ((String) value).isEmpty()) {
            throw DriverError.invalid("path must be a non-empty string, got " + typeName(value));
        }
        return (String) value;
    }

    /** A JSON integer (fastjson2 gives Integer, Long or BigInteger; a fraction is BigDecimal). */
    static boolean isInteger(Number value) {
        return value instanceof Integer || value instanceof Long || value instanceof BigInteger;
    }

    static long clamp(Number integer) {
        if (integer instanceof BigInteger) {
            return ((BigInteger) integer).signum() > 0 ? Long.MAX_VALUE : Long.MIN_VALUE;
        }
        return integer.longValue();
    }

    static String typeName(Object value) {
        return value == null ? "null" : value.getClass().getSimpleName();
    }

    /** What a store is opened with. */
    static final class OpenConfig {
        final boolean sync;
        final int segmentBytes;
        final int maxBodyBytes;

        OpenConfig(boolean sync, int segmentBytes, int maxBodyBytes) {
            this.sync = sync;
            this.segmentBytes = segmentBytes;
            this.maxBodyBytes = maxBodyBytes;
        }
    }
}

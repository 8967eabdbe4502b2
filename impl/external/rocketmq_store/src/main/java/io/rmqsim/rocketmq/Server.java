package io.rmqsim.rocketmq;

import com.alibaba.fastjson2.JSONObject;
import java.io.IOException;
import java.io.InputStream;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.rocketmq.store.DefaultMessageStore;

/** Serves one open of one store over the wire: hello, open, the operations, close. */
final class Server implements Points {
    private final Wire wire;
    private final Bug bug;
    private final boolean fastClose;
    private StoreDriver driver;
    private int maxBodyBytes;
    private boolean closed;
    private Object requestId;
    private boolean waitAtPoints;
    private long now;

    Server(Wire wire, Bug bug, boolean fastClose) {
        this.wire = wire;
        this.bug = bug;
        this.fastClose = fastClose;
    }

    /** Answers requests until close (exit status 0) or the end of input (0); 2 if the protocol broke. */
    int serve() throws IOException {
        while (true) {
            JSONObject request;
            try {
                request = wire.read();
            } catch (Wire.Malformed e) {
                wire.error(null, DriverError.invalid("malformed request: " + e.getMessage()));
                System.err.println("rmqsim: malformed request, stopping: " + e.getMessage());
                return 2;
            }
            if (request == null) {
                return 0;
            }
            requestId = request.get("id");
            Object op = request.get("op");
            try {
                wire.ok(requestId, answer(op, request));
            } catch (Points.Broken e) {
                System.err.println("rmqsim: " + e.getMessage());
                return 2;
            } catch (Throwable e) {
                wire.error(requestId, DriverError.of(e));
            }
            if (closed) {
                return 0;
            }
        }
    }

    private Object answer(Object op, JSONObject request) throws Exception {
        Object clock = request.get("now");
        if (clock instanceof Number && Args.isInteger((Number) clock)) {
            now = Args.clamp((Number) clock);
        }
        waitAtPoints = Boolean.TRUE.equals(request.get("wait_at_points"));
        if ("hello".equals(op)) {
            return hello();
        }
        if ("open".equals(op)) {
            return open(new Args(request));
        }
        if (!(op instanceof String) || !List.of("put", "get", "offsets", "flush", "retain", "close").contains(op)) {
            throw DriverError.invalid("unknown op " + op);
        }
        if (driver == null) {
            throw DriverError.notServing("the store is not open");
        }
        return operation((String) op, new Args(request));
    }

    private Object operation(String op, Args args) throws Exception {
        switch (op) {
            case "put":
                String topic = args.topic();
                int queue = args.queue();
                return driver.put(topic, queue, args.bodies(maxBodyBytes), now);
            case "get":
                String t = args.topic();
                int q = args.queue();
                long offset = args.integer("offset", 0);
                return driver.get(t, q, offset, args.integer("max_count", 1));
            case "offsets":
                return driver.offsets(args.topic(), args.queue());
            case "flush":
                driver.flush();
                return null;
            case "retain":
                driver.retain(args.integer("cutoff", Long.MIN_VALUE));
                return null;
            default: // close
                StoreDriver closing = driver;
                driver = null;
                closed = true;
                closing.close(fastClose);
                return null;
        }
    }

    private Object open(Args args) throws Exception {
        if (driver != null) {
            throw DriverError.invalid("the store is already open (one process serves one open)");
        }
        String path = args.path();
        Args.OpenConfig config = args.config();
        driver = StoreDriver.open(path, config, bug, this);
        maxBodyBytes = config.maxBodyBytes;
        return null;
    }

    private Map<String, Object> hello() {
        Map<String, Object> hello = new LinkedHashMap<>();
        hello.put("protocol", 1);
        hello.put("layer", "store");
        String name = "rocketmq-store " + rocketmqVersion();
        hello.put("implementation", bug == Bug.NONE ? name : name + " (seeded bug: " + bug.option + ")");
        hello.put("flush_modes", List.of("sync", "async"));
        // A batch is appended as separate records, each checked on its own at recovery (README).
        hello.put("batch_atomic", false);
        return hello;
    }

    static String rocketmqVersion() {
        String resource = "/META-INF/maven/org.apache.rocketmq/rocketmq-store/pom.properties";
        try (InputStream in = DefaultMessageStore.class.getResourceAsStream(resource)) {
            Properties properties = new Properties();
            if (in != null) {
                properties.load(in);
            }
            return properties.getProperty("version", "unknown");
        } catch (IOException e) {
            return "unknown";
        }
    }

    @Override
    public void at(String name) {
        try {
            wire.point(requestId, name, waitAtPoints);
        } catch (IOException | Wire.Malformed e) {
            throw new Points.Broken("at point " + name + ": " + e.getMessage());
        }
    }
}

package io.rmqsim.rocketmq;

import com.alibaba.fastjson2.JSON;
import com.alibaba.fastjson2.JSONException;
import com.alibaba.fastjson2.JSONObject;
import com.alibaba.fastjson2.JSONWriter;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * The protocol's lines (docs/PROTOCOL.md): one JSON object per line in, one per line out,
 * flushed after each. Replies are ASCII (other characters escaped as backslash-u sequences).
 */
final class Wire {
    /** A line that is not a JSON object: the stream cannot be trusted any further. */
    static final class Malformed extends Exception {
        private static final long serialVersionUID = 1L;

        Malformed(String message) {
            super(message);
        }
    }

    private final BufferedReader in;
    private final OutputStream out;

    Wire(BufferedReader in, OutputStream out) {
        this.in = in;
        this.out = out;
    }

    /** The next request, or null at the end of input. */
    JSONObject read() throws IOException, Malformed {
        String line = in.readLine();
        if (line == null) {
            return null;
        }
        try {
            JSONObject request = JSON.parseObject(line);
            if (request == null) {
                throw new Malformed("an empty line");
            }
            return request;
        } catch (JSONException e) {
            String start = line.length() > 80 ? line.substring(0, 80) + "..." : line;
            throw new Malformed("not a JSON object: " + start + " (" + e.getMessage() + ")");
        }
    }

    void ok(Object id, Object result) throws IOException {
        Map<String, Object> reply = new LinkedHashMap<>();
        reply.put("id", id);
        reply.put("ok", result);
        write(reply);
    }

    void error(Object id, DriverError e) throws IOException {
        Map<String, Object> error = new LinkedHashMap<>();
        error.put("kind", e.kind);
        if (e.type != null) {
            error.put("type", e.type);
        }
        error.put("message", e.getMessage() == null ? "" : e.getMessage());
        Map<String, Object> reply = new LinkedHashMap<>();
        reply.put("id", id);
        reply.put("error", error);
        write(reply);
    }

    /**
     * Announces a fault point of request {@code id}; when the request asked to wait at points,
     * reads the {@code go_on} line (rmqsim kills the process group here instead, to crash it).
     */
    void point(Object id, String name, boolean wait) throws IOException, Malformed {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("id", id);
        line.put("point", name);
        write(line);
        if (!wait) {
            return;
        }
        JSONObject answer = read();
        if (answer == null) {
            throw new Malformed("end of input while waiting at point " + name);
        }
        if (answer.size() != 1 || !answer.containsKey("go_on") || !Objects.equals(id, answer.get("go_on"))) {
            throw new Malformed("expected {\"go_on\": " + id + "} at point " + name + ", got " + answer);
        }
    }

    private void write(Map<String, Object> line) throws IOException {
        String text = JSON.toJSONString(line, JSONWriter.Feature.WriteNulls,
                JSONWriter.Feature.EscapeNoneAscii);
        out.write((text + "\n").getBytes(StandardCharsets.US_ASCII));
        out.flush();
    }
}

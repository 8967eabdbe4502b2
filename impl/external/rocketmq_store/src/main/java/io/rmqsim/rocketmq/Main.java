package io.rmqsim.rocketmq;

import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

/**
 * rocketmq-store-server: the rmqsim store-layer protocol (docs/PROTOCOL.md) over the real
 * Apache RocketMQ DefaultMessageStore. Options: {@code --bug NAME} (a seeded bug),
 * {@code --shutdown-sleep} (close pays RocketMQ's fixed 3 s sleep).
 */
public final class Main {
    private Main() {
    }

    public static void main(String[] args) throws Exception {
        // stdout carries protocol lines only: the protocol gets the real fd 1, and anything
        // else that prints to System.out (RocketMQ, its libraries) goes to stderr.
        OutputStream protocol = new BufferedOutputStream(new FileOutputStream(FileDescriptor.out));
        System.setOut(System.err);
        Bug bug = Bug.NONE;
        boolean fastClose = true;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--bug") && i + 1 < args.length && Bug.named(args[i + 1]) != null) {
                bug = Bug.named(args[++i]);
            } else if (args[i].equals("--shutdown-sleep")) {
                fastClose = false;
            } else {
                System.err.println("rocketmq-store-server: unknown option or bug " + String.join(" ", args)
                        + "; usage: [--bug NAME] [--shutdown-sleep]; known bugs: " + Bug.known());
                Runtime.getRuntime().halt(2);
            }
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        int status = new Server(new Wire(in, protocol), bug, fastClose).serve();
        protocol.flush();
        System.err.flush();
        // The store is shut down (close) or the parent is gone: its threads must not keep the JVM.
        System.exit(status);
    }
}

package io.rmqsim.rocketmq;

import org.apache.rocketmq.logging.ch.qos.logback.classic.Level;
import org.apache.rocketmq.logging.ch.qos.logback.classic.Logger;
import org.apache.rocketmq.logging.ch.qos.logback.classic.LoggerContext;
import org.apache.rocketmq.logging.ch.qos.logback.classic.encoder.PatternLayoutEncoder;
import org.apache.rocketmq.logging.ch.qos.logback.classic.spi.Configurator;
import org.apache.rocketmq.logging.ch.qos.logback.classic.spi.ILoggingEvent;
import org.apache.rocketmq.logging.ch.qos.logback.core.ConsoleAppender;
import org.apache.rocketmq.logging.ch.qos.logback.core.spi.ContextAwareBase;

/**
 * RocketMQ's (shaded) logback configuration for the driver, in code: everything to stderr
 * as "rocketmq LEVEL Logger: message", never to files under ~/logs; the root level is the
 * system property {@code rmqsim.rocketmq.log} (RMQSIM_ROCKETMQ_LOG in the launcher), WARN
 * by default. Registered in META-INF/services, so logback's ContextInitializer runs it
 * before RocketMQ's DefaultJoranConfiguratorExt (which it sorts last) and stops there: no
 * XML configuration is looked up or parsed (Joran's parse: ~0.05 s CPU of every JVM start).
 */
public final class StderrLogging extends ContextAwareBase implements Configurator {
    @Override
    public ExecutionStatus configure(LoggerContext context) {
        PatternLayoutEncoder encoder = new PatternLayoutEncoder();
        encoder.setContext(context);
        encoder.setPattern("rocketmq %-5level %logger{0}: %msg%n");
        encoder.start();
        ConsoleAppender<ILoggingEvent> stderr = new ConsoleAppender<>();
        stderr.setContext(context);
        stderr.setName("STDERR");
        stderr.setTarget("System.err");
        stderr.setEncoder(encoder);
        stderr.start();
        Logger root = context.getLogger(Logger.ROOT_LOGGER_NAME);
        root.setLevel(Level.toLevel(System.getProperty("rmqsim.rocketmq.log", "WARN"), Level.WARN));
        root.addAppender(stderr);
        return ExecutionStatus.DO_NOT_INVOKE_NEXT_IF_ANY;
    }
}

package io.tickwheel.client;

/**
 * BindResult is a bind's reply.
 *
 * @param delivered queued events that follow the reply
 * @param dropped events the server gave up on since the receiver was last bound
 * @param firstSeq the seq of the first event that follows
 */
public record BindResult(long delivered, long dropped, long firstSeq) {}

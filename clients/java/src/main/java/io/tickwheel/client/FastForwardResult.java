package io.tickwheel.client;

/**
 * FastForwardResult is a fast_forward's reply.
 *
 * @param now tw-time after it (less than asked when a freeze stopped it)
 * @param fired firings it caused, of all receivers
 */
public record FastForwardResult(long now, long fired) {}

import type { FireMessage } from "./protocol.js";

/** A timer of a receiver bound by this client fired. */
export interface FireEvent extends Omit<FireMessage, "kind"> {
  kind: "fire";
}

/**
 * Another session bound the receiver: this client gets no more of its
 * events and will not bind it again after a reconnect.
 */
export interface TakeoverEvent {
  kind: "takeover";
  receiver: bigint;
  /** The session that has it now. */
  session: bigint;
}

/**
 * `count` events of the receiver were lost: the server gave up on them (a
 * bind reply's count, a dropped notice) or the seqs show a gap. It comes in
 * order, ahead of the events after the loss.
 */
export interface DroppedEvent {
  kind: "dropped";
  receiver: bigint;
  count: bigint;
}

/** What the client delivers: fires, takeover notices and reports of lost events. */
export type Event = FireEvent | TakeoverEvent | DroppedEvent;

/**
 * EventQueue holds the events between the socket and the consumer, in
 * order. The consumer is either a handler (called for one event at a time,
 * awaited) or one async iterator. `done` is called for each event once
 * the consumer has finished with it: the handler returned (or its promise
 * settled), or the iterator was asked for the next event. `pressure`
 * reports when the queue passes `limit` (true) and when it has drained
 * to half of it (false), so the client can stop and restart reading its
 * socket.
 */
export class EventQueue {
  private q: Event[] = [];
  private head = 0;
  private waiting: ((r: IteratorResult<Event>) => void) | null = null;
  private taken: Event | null = null;
  private running = false;
  private ended = false;
  private paused = false;

  constructor(
    private readonly limit: number,
    private readonly handler: ((ev: Event) => void | Promise<void>) | null,
    private readonly done: (ev: Event) => void,
    private readonly pressure: (full: boolean) => void,
    private readonly onHandlerError: (err: unknown) => void,
  ) {}

  get length(): number {
    return this.q.length - this.head;
  }

  push(ev: Event): void {
    if (this.ended) return;
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = null;
      this.taken = ev;
      w({ value: ev, done: false });
      return;
    }
    this.q.push(ev);
    if (!this.paused && this.length >= this.limit) {
      this.paused = true;
      this.pressure(true);
    }
    if (this.handler && !this.running) void this.run();
  }

  private shift(): Event | undefined {
    if (this.head >= this.q.length) return undefined;
    const ev = this.q[this.head++];
    if (this.head > 1024 && this.head * 2 > this.q.length) {
      this.q = this.q.slice(this.head);
      this.head = 0;
    }
    if (this.paused && this.length <= this.limit / 2) {
      this.paused = false;
      this.pressure(false);
    }
    return ev;
  }

  private async run(): Promise<void> {
    this.running = true;
    for (let ev = this.shift(); ev && !this.ended; ev = this.shift()) {
      try {
        await this.handler!(ev);
      } catch (err) {
        this.onHandlerError(err);
      }
      this.done(ev);
    }
    this.running = false;
  }

  /** next is the iterator's: it finishes the event taken before and waits for the next. */
  next(): Promise<IteratorResult<Event>> {
    if (this.taken) {
      const t = this.taken;
      this.taken = null;
      this.done(t);
    }
    const ev = this.shift();
    if (ev) {
      this.taken = ev;
      return Promise.resolve({ value: ev, done: false });
    }
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => {
      this.waiting = resolve;
    });
  }

  /** end stops delivery: a waiting iterator ends, queued events are dropped (not done). */
  end(): void {
    this.ended = true;
    this.q = [];
    this.head = 0;
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = null;
      w({ value: undefined, done: true });
    }
  }
}

import type { FireMessage } from "./protocol.js";

/** How a receiver's events are acknowledged: not at all (plain mode), by the client, or by the user. */
export type AckMode = "none" | "auto" | "manual";

/**
 * AckState is what the client keeps of one receiver bound in acknowledged
 * mode: what the server confirmed acked, what the user has finished, what
 * was acked on the current connection, and the events delivered but not
 * yet confirmed (to drop their redeliveries after a reconnect).
 */
export class AckState {
  /** Highest seq the server confirmed acked. */
  acked = 0n;
  /** Highest seq the user has finished (auto) or acked (manual). */
  want = 0n;
  /** Highest ack sent on the current connection. */
  sent = 0n;
  /** Highest seq received on the current connection since its bind. */
  seen = 0n;
  // The events delivered and not yet confirmed acked, to tell their
  // redeliveries from new events: seqs keptStart, keptStart+1, ... (a
  // receiver's events come in seq order), each as its tid, tick and fired
  // (their low 52 bits, as numbers: cheap to keep and compare).
  private keptStart = 0n;
  private kept: number[] = []; // 3 numbers per event, from keptHead
  private keptHead = 0;

  constructor(public mode: AckMode) {}

  /** A new connection's bind replied firstSeq: a server that lost its state numbers from below what it confirmed. */
  bound(firstSeq: bigint): void {
    this.sent = 0n;
    this.seen = 0n;
    if (firstSeq > 0n && firstSeq <= this.acked) this.reset();
  }

  private reset(): void {
    this.acked = 0n;
    this.want = 0n;
    this.kept = [];
    this.keptHead = 0;
  }

  private get keptLen(): number {
    return (this.kept.length - this.keptHead) / 3;
  }

  /** fire notes an arriving event and reports whether it is a duplicate of one delivered before. */
  fire(f: FireMessage): boolean {
    if (f.seq > this.seen) this.seen = f.seq;
    const tid = Number(BigInt.asUintN(52, f.tid));
    const tick = Number(BigInt.asUintN(52, f.tick));
    const fired = Number(BigInt.asUintN(52, f.fired));
    const n = this.keptLen;
    const i = f.seq >= this.keptStart ? f.seq - this.keptStart : -1n;
    if (i >= 0n && i < BigInt(n)) {
      const k = this.keptHead + 3 * Number(i);
      if (this.kept[k] === tid && this.kept[k + 1] === tick && this.kept[k + 2] === fired) return true;
      this.reset(); // the same seq is another event: the server started again
    } else if (f.seq <= this.acked) {
      return true;
    }
    if (this.keptLen === 0 || f.seq !== this.keptStart + BigInt(this.keptLen)) {
      this.kept = []; // not the next seq (the server started again): keep from here
      this.keptHead = 0;
      this.keptStart = f.seq;
    }
    this.kept.push(tid, tick, fired);
    return false;
  }

  /** due returns the seq to ack on this connection now, or 0n. */
  due(): bigint {
    const s = this.want < this.seen ? this.want : this.seen;
    return s > this.sent && s > this.acked ? s : 0n;
  }

  /** confirmed: the server replied OK to an ack of seq. */
  confirmed(seq: bigint): void {
    if (seq <= this.acked) return;
    this.acked = seq;
    if (seq < this.keptStart) return;
    const drop = seq - this.keptStart + 1n;
    const n = this.keptLen;
    if (drop >= BigInt(n)) {
      this.kept = [];
      this.keptHead = 0;
      this.keptStart = seq + 1n;
      return;
    }
    this.keptHead += 3 * Number(drop);
    this.keptStart = seq + 1n;
    if (this.keptHead > 3072 && this.keptHead * 2 > this.kept.length) {
      this.kept = this.kept.slice(this.keptHead);
      this.keptHead = 0;
    }
  }
}

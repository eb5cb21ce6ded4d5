import type { FireMessage } from "./protocol.js";

/** How a receiver's events are acknowledged: not at all (plain mode), by the client, or by the user. */
export type AckMode = "none" | "auto" | "manual";

function fingerprint(f: FireMessage): string {
  return `${f.tid}/${f.tick}/${f.fired}`;
}

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
  /** Delivered events above `acked`: seq -> fingerprint. */
  private kept = new Map<bigint, string>();

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
    this.kept.clear();
  }

  /** fire notes an arriving event and reports whether it is a duplicate of one delivered before. */
  fire(f: FireMessage): boolean {
    if (f.seq > this.seen) this.seen = f.seq;
    const fp = fingerprint(f);
    const old = this.kept.get(f.seq);
    if (old === fp) return true;
    if (old !== undefined) {
      this.reset(); // the same seq is another event: the server started again
    } else if (f.seq <= this.acked) {
      return true;
    }
    this.kept.set(f.seq, fp);
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
    for (const k of this.kept.keys()) {
      if (k > seq) break; // kept in seq order
      this.kept.delete(k);
    }
  }
}

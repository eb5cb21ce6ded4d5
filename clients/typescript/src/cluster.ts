// Several addresses: the nodes of a tickwheel cluster, of which only the
// leader serves clients. A follower answers hello (and every other request)
// with "not_leader", naming the leader's client address when it knows it,
// and closes the connection (docs/PROTOCOL.md, "Clusters").
import { ConnectError, TickwheelError } from "./errors.js";
import { NOT_LEADER } from "./protocol.js";

/** How many not_leader redirections are followed from one address of the list before the next is tried. */
export const DEFAULT_LEADER_HOPS = 3;

/** parseAddr splits "host:port" (IPv6 hosts in brackets); it throws a RangeError for anything else. */
export function parseAddr(addr: string): { host: string; port: number } {
  const i = addr.lastIndexOf(":");
  if (i < 0) throw new RangeError(`tickwheel: address ${addr}: want host:port`);
  const host = addr.slice(0, i).replace(/^\[|\]$/g, "");
  const port = Number(addr.slice(i + 1));
  if (!/^\d+$/.test(addr.slice(i + 1)) || port < 1 || port > 65535) {
    throw new RangeError(`tickwheel: address ${addr}: the port must be a number from 1 to 65535`);
  }
  return { host, port };
}

/**
 * splitAddrs returns the addresses of addr (one "host:port", or several
 * separated by commas) then of extra, without blanks and duplicates, in
 * order, each checked by parseAddr.
 */
export function splitAddrs(addr: string, extra: string[] = []): string[] {
  const out: string[] = [];
  for (const a of [addr, ...extra].flatMap((s) => s.split(","))) {
    const t = a.trim();
    if (t === "" || out.includes(t)) continue;
    parseAddr(t);
    out.push(t);
  }
  if (out.length === 0) throw new RangeError(`tickwheel: no server address (addr ${JSON.stringify(addr)})`);
  return out;
}

/** What a pass over the addresses came to when it connected nowhere. */
export interface PassFailure {
  /** The error to report: the only address's own, or a ConnectError listing each. */
  err: Error;
  /** A node knew no leader (an election may be under way): another pass may succeed. */
  noLeader: boolean;
}

/**
 * pass tries each address once, from index start round-robin (and first
 * hint, the leader named when the last connection ended, if any),
 * following not_leader replies at most hops times per address. It resolves
 * to the index of the list's address the connection began at (-1: the
 * hint), or to a PassFailure; it rejects when signal aborts or when a node
 * refuses the hello for another reason (a bad token: the cluster's answer).
 */
export async function pass(
  addrs: string[], start: number, hint: string, hops: number,
  openAt: (addr: string) => Promise<void>, signal?: AbortSignal,
): Promise<number | PassFailure> {
  const tried: string[] = [];
  const errs: Error[] = [];
  let noLeader = false;
  const targets: [string, number][] = hint ? [[hint, -1]] : [];
  for (let k = 0; k < addrs.length; k++) targets.push([addrs[(start + k) % addrs.length], (start + k) % addrs.length]);
  for (const [first, idx] of targets) {
    let addr = first;
    const chain = [addr];
    for (;;) {
      try {
        parseAddr(addr);
        await openAt(addr);
        return idx;
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        if (!(err instanceof TickwheelError)) {
          tried.push(addr);
          errs.push(err as Error);
          break; // the network, a timeout, a bad address named: the next one may do
        }
        if (err.codeNum !== NOT_LEADER) throw err;
        if (!err.leader) {
          tried.push(addr);
          errs.push(err);
          noLeader = true;
          break;
        }
        if (chain.length > hops) {
          tried.push(first);
          errs.push(new TickwheelError("hello", NOT_LEADER, `followed not_leader ${hops} times (${chain.join(" -> ")}, ` +
            `which names ${err.leader}) without reaching the leader (leaderHops)`, err.leader));
          break;
        }
        addr = err.leader;
        chain.push(addr);
      }
    }
  }
  return { err: errs.length === 1 ? errs[0] : new ConnectError(tried, errs), noLeader };
}

/** sleepJitter waits a random time in [ms/2, ms]; it rejects with signal's reason if it aborts first. */
export function sleepJitter(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms / 2 + Math.random() * ms / 2);
    const onAbort = (): void => {
      clearTimeout(t);
      reject(signal!.reason as Error);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * bounded runs fn (a connection attempt to addr) with signal, bounded by
 * ms too (0: not); a timeout of its own is an error naming addr.
 */
export async function bounded(addr: string, ms: number, signal: AbortSignal | undefined,
  fn: (s?: AbortSignal) => Promise<void>): Promise<void> {
  if (ms === 0) return fn(signal);
  const timeout = AbortSignal.timeout(ms);
  try {
    return await fn(signal ? AbortSignal.any([signal, timeout]) : timeout);
  } catch (err) {
    if (timeout.aborted && !signal?.aborted) throw new Error(`tickwheel: ${addr}: no hello reply within ${ms} ms (dialTimeoutMs)`, { cause: err });
    throw err;
  }
}

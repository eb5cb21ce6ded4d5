import { NOT_LEADER, codeName, type ErrorCodeName } from "./protocol.js";

/**
 * TickwheelError is an error reply from the server: `code` is the
 * protocol's name for it ("not_found", "exists", "invalid_argument", ...)
 * and `codeNum` its number; `op` the request's op. Match on the code,
 * never the message, which is for humans.
 */
export class TickwheelError extends Error {
  override name = "TickwheelError";
  constructor(
    readonly op: string,
    readonly codeNum: number,
    readonly serverMessage: string,
    /** For "not_leader": the leader's client address the node named ("" when it knows none). */
    readonly leader?: string,
  ) {
    super(`tickwheel: ${op}: ${codeName(codeNum)}: ${serverMessage}` +
      (codeNum === NOT_LEADER ? ` (leader ${leader || "unknown"})` : ""));
  }

  /** The protocol's name of the code, or "code(N)" for one this client does not know. */
  get code(): ErrorCodeName | string {
    return codeName(this.codeNum);
  }
}

/**
 * DisconnectedError: the connection dropped while the call was in flight,
 * so the server may or may not have applied it. The client reconnects by
 * itself; calls made after it wait for the new connection.
 */
export class DisconnectedError extends Error {
  override name = "DisconnectedError";
  readonly code = "disconnected";
}

/**
 * ConnectError: no address of a cluster's list accepted the connection.
 * `errors` holds each address's failure, in the order tried.
 */
export class ConnectError extends Error {
  override name = "ConnectError";
  readonly code = "connect";
  constructor(
    readonly addrs: string[],
    readonly errors: Error[],
  ) {
    super("tickwheel: no server accepted the connection: " + addrs.map((a, i) => `${a}: ${errors[i].message}`).join("; "));
  }
}

/** ClosedError: the client was closed. */
export class ClosedError extends Error {
  override name = "ClosedError";
  readonly code = "closed";
  constructor() {
    super("tickwheel: client closed");
  }
}

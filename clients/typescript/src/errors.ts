import { codeName, type ErrorCodeName } from "./protocol.js";

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
  ) {
    super(`tickwheel: ${op}: ${codeName(codeNum)}: ${serverMessage}`);
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

/** ClosedError: the client was closed. */
export class ClosedError extends Error {
  override name = "ClosedError";
  readonly code = "closed";
  constructor() {
    super("tickwheel: client closed");
  }
}

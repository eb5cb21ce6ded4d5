// The TypeScript/Node client of tickwheel, the timer service for game
// servers. See README.md for a tour and docs/PROTOCOL.md for the wire.
export { Client, connect } from "./client.js";
export type { AddOptions, BindOptions, BindResult, CallOptions, ClusterAddOptions, ConnectOptions, TLSOptions } from "./options.js";
export type { AckMode } from "./acks.js";
export type { DroppedEvent, Event, FireEvent, TakeoverEvent } from "./events.js";
export { ClosedError, ConnectError, DisconnectedError, TickwheelError } from "./errors.js";
export {
  ErrorCodes, Kind, Missed, NOT_LEADER, Op, PROTOCOL_VERSION, codeName, decodeHello, decodeListGroupPage, decodeListPage, decodeMessage,
  camelCase, decodeCluster, decodeStats, decodeTimer, decodeUints, encodeRequest, FrameSplitter,
} from "./protocol.js";
export type { ClusterState, ErrorCodeName, Hello, Limits, Message, Repeat, Request, Stats, Timer, U64 } from "./protocol.js";

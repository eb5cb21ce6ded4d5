// Package protocol is tickwheel's wire format: framing, request decoding and
// reply/event encoding, as pure functions over byte slices. It has no
// sockets, goroutines or state; docs/PROTOCOL.md is the specification for
// client authors in any language.
//
// # Frames
//
// Every message is a frame: a 4-byte big-endian length L (1..max frame size),
// then L bytes holding exactly one msgpack value. SplitFrame cuts the first
// frame off a byte stream; ErrIncomplete means "read more":
//
//	for {
//		payload, n, err := protocol.SplitFrame(buf, maxFrame)
//		if err == protocol.ErrIncomplete {
//			break // keep buf, wait for more bytes
//		}
//		if err != nil {
//			return err // ErrEmptyFrame or ErrFrameTooLarge: close the connection
//		}
//		handle(payload) // payload aliases buf
//		buf = buf[n:]
//	}
//
// # Server side
//
// DecodeRequest decodes a request payload into a reused Request without
// allocating (except hello's strings). Errors wrap ErrMalformed (reply
// CodeMalformed and close) or ErrUnknownOp (reply CodeUnknownOp, keep going);
// either way Request.ID holds the id when it could be read:
//
//	var req protocol.Request
//	if err := protocol.DecodeRequest(payload, &req); err != nil {
//		code := protocol.CodeMalformed
//		if errors.Is(err, protocol.ErrUnknownOp) {
//			code = protocol.CodeUnknownOp
//		}
//		out = protocol.AppendError(out, req.ID, code, err.Error())
//	}
//
// Replies and pushes are appended, one whole frame each, to the caller's
// buffer (AppendOK, AppendHelloOK, AppendTimerOK, AppendListOK,
// AppendStatsOK, AppendError, AppendFire, AppendTakeover); none allocates
// beyond growing that buffer, so a server can batch a tick's events into one
// write.
//
// # Client side
//
// AppendRequest encodes a request frame. DecodeMessage decodes a server
// message; an ok reply's result is left raw in Message.Result, to be decoded
// according to the request's op with DecodeUints, DecodeHello, DecodeTimer,
// DecodeListPage (a list returns one page and the cursor of the next) or
// DecodeStats.
//
// # Hostile input
//
// All decoders treat input as hostile: every declared length (array, map,
// str, bin, ext) is checked against the bytes left before it is used,
// ignored values may nest at most 32 levels, and the work done is linear in
// the input. Decoded []byte fields (Request.Data, Fire.Data, Timer.Data,
// Message.Result) alias the payload: copy them before the buffer is reused.
//
// # Leniency
//
// Requests accept any msgpack integer encoding for integers (signed ones
// holding non-negative values included), nil for any omitted argument,
// omitted trailing arguments, and extra trailing elements (ignored). The
// encoders always emit the smallest encodings, so their output is canonical.
package protocol

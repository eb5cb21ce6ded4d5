package server

import "github.com/tickwheel/tickwheel/protocol"

// list answers a list request with one page of the receiver's timers: those
// with tid >= req.FromTid in ascending tid order, at most req.Limit of them
// (0, or more than max_list_page, means max_list_page), and no more than fit
// in a reply frame of max_list_bytes — but always at least one when any is
// left (the config makes max_list_bytes hold a timer with max_data). The
// reply's next is the tid of the first timer left out, or 0 when none is.
//
// Cost: the wheel walks the receiver's timers once (ListPage: linear in
// their number, whatever order they were added in); only the page, one
// timer more, is copied and encoded. Owned by the event loop.
func (st *state) list(s *session, req *protocol.Request) {
	l := &st.cfg.Limits
	limit := l.MaxListPage
	if req.Limit != 0 && req.Limit < uint64(limit) {
		limit = int(req.Limit)
	}
	// One timer more than the page says whether another page follows, and
	// where it starts.
	st.work += st.wheel.ReceiverLen(req.Receiver) // ListPage walks them all
	st.listBuf = st.wheel.ListPage(req.Receiver, req.FromTid, limit+1, st.listBuf[:0])
	st.timerBuf = st.timerBuf[:0]
	size := protocol.ListReplyOverhead
	var next uint64
	for i := range st.listBuf {
		t := timerOf(&st.listBuf[i])
		n := protocol.TimerSize(&t)
		if i == limit || (i > 0 && size+n > l.MaxListBytes) {
			next = t.Tid // > the tids before it, so never 0
			break
		}
		size += n
		st.timerBuf = append(st.timerBuf, t)
	}
	s.out = protocol.AppendListOK(s.out, req.ID, st.timerBuf, next)
	// Drop the views into the wheel's memory.
	clear(st.listBuf)
	clear(st.timerBuf)
}

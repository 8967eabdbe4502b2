package main

import (
	"sync/atomic"
	"time"

	"github.com/agiledragon/gomonkey/v2"
)

// The simulated clock. time.Now is patched at run time (gomonkey rewrites the entry of
// time.Now to jump to fakeNow; the binary is built with -gcflags=all=-l so that no caller has
// time.Now inlined past the patch). Every time.Now() in the process, Milvus's rocksmq package
// included, returns the current request's "now" (whole seconds, no monotonic reading). Timers
// and tickers run on the runtime's own clock and are not affected: the driver sets their
// intervals out of reach instead (see open).
var simNow atomic.Int64

func setNow(s int64) { simNow.Store(s) }

func fakeNow() time.Time { return time.Unix(simNow.Load(), 0) }

func installClock() {
	patches = append(patches, gomonkey.ApplyFunc(time.Now, fakeNow))
}

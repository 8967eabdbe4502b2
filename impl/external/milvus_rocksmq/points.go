package main

import "C"

import (
	"encoding/json"
	"fmt"
	"os"
	"unsafe"
)

// opContext is the request being served while Milvus runs; the write hooks announce fault
// points for it. nil outside a request (then the hooks only pass the writes through).
type opContext struct {
	id     json.RawMessage
	point  string // the operation's name in point names ("retention" for run_retention)
	wait   bool
	writes int // writes started so far in this request
}

var current *opContext

// announce sends {"id", "point"} and, when the request asked for it, waits for
// {"go_on": id} (rmqsim may instead SIGKILL the process here).
func announce(name string) {
	c := current
	if c == nil {
		return
	}
	send(struct {
		ID    json.RawMessage `json:"id"`
		Point string          `json:"point"`
	}{c.id, name})
	if !c.wait {
		return
	}
	line := readLine()
	var goOn struct {
		GoOn json.RawMessage `json:"go_on"`
	}
	if err := json.Unmarshal(line, &goOn); err != nil || len(goOn.GoOn) == 0 {
		fmt.Fprintf(os.Stderr, "rmqsim-milvus: expected {\"go_on\": %s} at %s, got %q\n", c.id, name, line)
		os.Exit(3)
	}
}

// pointName: the k-th write of an operation is "<op>.before_write" / "<op>.after_write" for
// k = 1 and "<op>.before_write.k" / "<op>.after_write.k" after that.
func pointName(op, phase string, k int) string {
	if k <= 1 {
		return op + "." + phase
	}
	return fmt.Sprintf("%s.%s.%d", op, phase, k)
}

// rmqsimWrite is called by hook.c around every RocksDB write: phase 0 before, 1 after.
//
//export rmqsimWrite
func rmqsimWrite(db unsafe.Pointer, phase C.int, failed C.int) {
	c := current
	if c == nil {
		return
	}
	if phase == 0 {
		c.writes++
		announce(pointName(c.point, "before_write", c.writes))
		return
	}
	if failed != 0 {
		fmt.Fprintf(os.Stderr, "rmqsim-milvus: write %d of %s failed in RocksDB\n", c.writes, c.point)
	}
	announce(pointName(c.point, "after_write", c.writes))
}

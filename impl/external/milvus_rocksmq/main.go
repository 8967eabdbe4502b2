// rmqsim-milvus: rmqsim's wire protocol v1 (newline-delimited JSON on stdin/stdout) around
// the real, unmodified Milvus RocksMQ server package
// (github.com/milvus-io/milvus/pkg/v2/mq/mqimpl/rocksmq/server). One process serves one open
// of the queue. See README.md for what is reached how and what is not reachable.
//
// It builds only through scripts/build-milvus.sh, which adds _overlay/zz_rmqsim_access.go to
// Milvus's package with `go build -overlay` (the Rmqsim* names used here come from it).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"syscall"

	"go.uber.org/zap/zapcore"

	"github.com/milvus-io/milvus/pkg/v2/log"
)

const milvusModule = "github.com/milvus-io/milvus/pkg/v2"

// proto is the protocol channel: the process's original standard output. Standard output
// itself (fd 1) is pointed at standard error before main runs, so that whatever else writes
// there (Milvus's zap logger opens "stdout") cannot corrupt the protocol.
var (
	proto  *os.File
	input  *bufio.Reader
	encBuf strings.Builder
)

func init() {
	fd, err := syscall.Dup(1)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rmqsim-milvus: dup(1):", err)
		os.Exit(2)
	}
	syscall.CloseOnExec(fd)
	proto = os.NewFile(uintptr(fd), "protocol")
	if err := syscall.Dup3(2, 1, 0); err != nil {
		fmt.Fprintln(os.Stderr, "rmqsim-milvus: dup3(2, 1):", err)
		os.Exit(2)
	}
}

// request is one line from rmqsim. Arguments absent from an op's request stay zero.
type request struct {
	ID           json.RawMessage `json:"id"`
	Op           string          `json:"op"`
	Now          *int64          `json:"now"`
	WaitAtPoints bool            `json:"wait_at_points"`

	Protocol int    `json:"protocol"`
	Layer    string `json:"layer"`
	Path     string `json:"path"`
	Config   *struct {
		PageSizeBytes      int64 `json:"page_size_bytes"`
		RetentionTimeS     int64 `json:"retention_time_s"`
		RetentionSizeBytes int64 `json:"retention_size_bytes"`
	} `json:"config"`
	Topic        string           `json:"topic"`
	Group        string           `json:"group"`
	N            *int             `json:"n"`
	MsgID        *json.Number     `json:"msg_id"` // any JSON integer: SPEC's ids are unbounded
	Messages     []wireMessage    `json:"messages"`
	Topics       *[]string        `json:"topics"`
	MessagesFrom map[string]int64 `json:"messages_from"`
}

type wireMessage struct {
	ID         *int64            `json:"id,omitempty"`
	Payload    []byte            `json:"payload"` // standard base64 on the wire
	Properties map[string]string `json:"properties"`
}

// opError is an error reply. Kind is one of SPEC's kinds or "Unexpected" (then Type is set).
type opError struct {
	Kind    string `json:"kind"`
	Type    string `json:"type,omitempty"`
	Message string `json:"message"`
}

func (e *opError) Error() string { return e.Kind + ": " + e.Message }

func fail(kind, format string, args ...any) *opError {
	return &opError{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// send writes one JSON object and a newline to the protocol channel in one write.
func send(v any) {
	encBuf.Reset()
	enc := json.NewEncoder(&encBuf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		fmt.Fprintln(os.Stderr, "rmqsim-milvus: encode:", err)
		os.Exit(2)
	}
	if _, err := io.WriteString(proto, encBuf.String()); err != nil {
		// rmqsim went away: nothing to answer to.
		os.Exit(0)
	}
}

// readLine reads one request line; at end of input the process exits (rmqsim is gone).
func readLine() []byte {
	line, err := input.ReadBytes('\n')
	if err != nil {
		if len(strings.TrimSpace(string(line))) == 0 {
			os.Exit(0)
		}
	}
	return line
}

func milvusVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == milvusModule {
				return dep.Version
			}
		}
	}
	return "unknown"
}

func main() {
	installClock()
	setUpMilvusLog()
	input = bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line := readLine()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var req request
		if err := json.Unmarshal(line, &req); err != nil {
			var probe struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(line, &probe)
			reply(probe.ID, nil, fail("InvalidArgument", "bad request line: %v", err))
			continue
		}
		if req.Now != nil {
			setNow(*req.Now)
		}
		result, err := serve(&req)
		reply(req.ID, result, err)
		if req.Op == "close" && err == nil {
			os.Exit(0)
		}
	}
}

func reply(id json.RawMessage, result any, err error) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	if err != nil {
		var oe *opError
		if !errors.As(err, &oe) {
			oe = classify(err)
		}
		send(struct {
			ID    json.RawMessage `json:"id"`
			Error *opError        `json:"error"`
		}{id, oe})
		return
	}
	send(struct {
		ID json.RawMessage `json:"id"`
		OK any             `json:"ok"`
	}{id, result})
}

// serve runs one request; a panic in Milvus code becomes an Unexpected "panic" error.
func serve(req *request) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			current = nil
			fmt.Fprintf(os.Stderr, "rmqsim-milvus: panic in %s: %v\n%s\n", req.Op, p, debug.Stack())
			err = &opError{Kind: "Unexpected", Type: "panic", Message: firstLine(fmt.Sprint(p))}
		}
	}()
	return dispatch(req)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// setUpMilvusLog keeps Milvus's zap logger at "error" (RMQSIM_MILVUS_LOG=debug|info|warn
// for more); it writes to fd 1, which init pointed at standard error.
func setUpMilvusLog() {
	level := zapcore.ErrorLevel
	if v := os.Getenv("RMQSIM_MILVUS_LOG"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			level = zapcore.ErrorLevel
		}
	}
	log.SetLevel(level)
}

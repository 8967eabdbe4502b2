package main

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/agiledragon/gomonkey/v2"

	"github.com/milvus-io/milvus/pkg/v2/mq/mqimpl/rocksmq/server"
	"github.com/milvus-io/milvus/pkg/v2/util/merr"
	"github.com/milvus-io/milvus/pkg/v2/util/paramtable"
)

// dbName is Milvus's database below the path rmqsim gives; Milvus adds dbName+"_meta_kv".
const dbName = "milvus_rocksmq"

// neverSeconds: the retention and compaction ticker intervals. The tickers run on the
// runtime's clock, which the simulated clock does not move; at ~31 years they never fire
// during a run. Retention runs only through the "run_retention" op.
const neverSeconds = "1000000000"

type driver struct {
	path   string
	rmq    *server.RmqsimQueue
	ids    *idMap
	groups map[[2]string]struct{} // every (topic, group) this process asked Milvus to create
}

var drv *driver

func dispatch(req *request) (any, error) {
	switch req.Op {
	case "hello":
		return map[string]any{
			"protocol":       1,
			"layer":          "queue",
			"implementation": "milvus-rocksmq " + milvusVersion(),
			"snapshot":       []string{"topics", "messages_from"},
		}, nil
	case "open":
		return nil, open(req)
	}
	if drv == nil {
		return nil, fail("NotServing", "the queue is not open")
	}
	return drv.op(req)
}

// pointOp is an operation's name in fault-point names.
func pointOp(op string) string {
	if op == "run_retention" {
		return "retention"
	}
	return op
}

// withPoints runs fn with the write hooks announcing points for req.
func withPoints(req *request, fn func() error) error {
	current = &opContext{id: req.ID, point: pointOp(req.Op), wait: req.WaitAtPoints}
	defer func() { current = nil }()
	return fn()
}

func open(req *request) error {
	if drv != nil {
		return fail("InvalidArgument", "already open: one process serves one open")
	}
	if req.Path == "" || req.Config == nil {
		return fail("InvalidArgument", "open needs a path and a config")
	}
	cfg := req.Config
	if cfg.PageSizeBytes <= 0 {
		return fail("InvalidArgument", "page_size_bytes must be positive, got %d", cfg.PageSizeBytes)
	}
	const mib = 1 << 20
	sizeMB := int64(-1)
	byteLimit := false
	if cfg.RetentionSizeBytes != -1 {
		if cfg.RetentionSizeBytes < 0 {
			return fail("InvalidArgument", "retention_size_bytes must be -1 or >= 0, got %d", cfg.RetentionSizeBytes)
		}
		sizeMB = (cfg.RetentionSizeBytes + mib - 1) / mib
		// Not a whole number of MiB: Milvus's parameter cannot say it. Its size test is
		// patched to the same comparison in bytes (README.md, "What is reached how", configuration).
		byteLimit = cfg.RetentionSizeBytes%mib != 0
	}
	minutes := "-1"
	if cfg.RetentionTimeS != -1 {
		if cfg.RetentionTimeS < 0 {
			return fail("InvalidArgument", "retention_time_s must be -1 or >= 0, got %d", cfg.RetentionTimeS)
		}
		m, ok := minutesFor(cfg.RetentionTimeS)
		if !ok {
			return fail("InvalidArgument", "retention_time_s=%d has no float number of minutes that Milvus turns back into it", cfg.RetentionTimeS)
		}
		minutes = m
	}
	// Configuration from the driver only: no milvus.yaml, no etcd (the default table would
	// try etcd at localhost:2379 and wait 5 s for it).
	paramtable.InitWithBaseTable(paramtable.NewBaseTable(paramtable.SkipRemote(true)))
	params := paramtable.Get()
	for key, value := range map[string]string{
		params.RocksmqCfg.PageSize.Key:               strconv.FormatInt(cfg.PageSizeBytes, 10),
		params.RocksmqCfg.RetentionTimeInMinutes.Key: minutes,
		params.RocksmqCfg.RetentionSizeInMB.Key:      strconv.FormatInt(sizeMB, 10),
		params.RocksmqCfg.TickerTimeInSeconds.Key:    neverSeconds,
		params.RocksmqCfg.CompactionInterval.Key:     neverSeconds,
	} {
		if err := params.Save(key, value); err != nil {
			return fmt.Errorf("paramtable %s=%s: %w", key, value, err)
		}
	}

	if byteLimit {
		retentionSizeBytes = cfg.RetentionSizeBytes
		// The patch jumps to the double's function value: keep it reachable (see patches).
		patches = append(patches, gomonkey.ApplyFunc(server.RmqsimMsgSizeExpiredCheck, msgSizeExpiredCheckBytes))
	}

	if err := os.MkdirAll(req.Path, 0o755); err != nil {
		return fmt.Errorf("mkdir %s: %w", req.Path, err)
	}
	name := filepath.Join(req.Path, dbName)
	_, statErr := os.Stat(name)
	fresh := errors.Is(statErr, os.ErrNotExist)
	var rmq *server.RmqsimQueue
	err := withPoints(req, func() error {
		// A new database: a crash can land before or after Milvus creates it. (Opening
		// writes no RocksDB batch, so the write hooks pass no point here.)
		if fresh {
			announce("open.before_write")
		}
		var err error
		rmq, err = server.NewRocksMQ(name)
		if err == nil && fresh {
			announce("open.after_write")
		}
		return err
	})
	if err != nil {
		return err
	}
	d := &driver{path: req.Path, rmq: rmq, groups: map[[2]string]struct{}{}}
	ids, err := loadIDMap(req.Path, d)
	if err != nil {
		return err
	}
	d.ids = ids
	drv = d
	return nil
}

// patches keeps every gomonkey patch reachable for the life of the process. A patched
// function's code jumps through a pointer to its double's function value, which gomonkey
// keeps only in the returned *Patches: dropping that lets the garbage collector free a
// heap-allocated double (a closure) while the patch still jumps through it. That happened:
// the double was a closure capturing the limit, and run_retention then crashed at random
// (SIGSEGV "unexpected fault address 0x0" in server.msgSizeExpiredCheck, or a recovered
// nil-pointer panic), at a different step in each run of the same trace.
var patches []*gomonkey.Patches

// retentionSizeBytes is the byte limit msgSizeExpiredCheckBytes compares with.
var retentionSizeBytes int64

// msgSizeExpiredCheckBytes is Milvus's msgSizeExpiredCheck (rocksmq_retention.go:369-376,
// "ackedSize-deletedAckedSize > size*MB") with the limit in bytes.
func msgSizeExpiredCheckBytes(deletedAckedSize, ackedSize int64) bool {
	return ackedSize-deletedAckedSize > retentionSizeBytes
}

// minutesFor is the shortest decimal for a float number of minutes m such that Milvus's
// int64(m * 60) (rocksmq_retention.go) gives back exactly s seconds: s/60 itself is not
// always one (123/60*60 = 122.99999999999999).
func minutesFor(s int64) (string, bool) {
	f := float64(s) / 60
	for i := 0; i < 8 && int64(f*60) < s; i++ {
		f = math.Nextafter(f, math.Inf(1))
	}
	str := strconv.FormatFloat(f, 'g', -1, 64)
	back, err := strconv.ParseFloat(str, 64)
	return str, err == nil && int64(back*60) == s
}

func (d *driver) op(req *request) (any, error) {
	r := d.rmq
	t, g := req.Topic, req.Group
	switch req.Op {
	case "create_topic":
		return nil, withPoints(req, func() error { return r.CreateTopic(t) })
	case "destroy_topic":
		return nil, withPoints(req, func() error { return r.DestroyTopic(t) })
	case "create_consumer_group":
		// SPEC's group is Milvus's consumer group plus a registered consumer: only
		// registered consumers count for acks (as Milvus's own client does both).
		return nil, withPoints(req, func() error {
			d.groups[[2]string{t, g}] = struct{}{}
			if err := r.CreateConsumerGroup(t, g); err != nil {
				return err
			}
			return r.RegisterConsumer(&server.Consumer{Topic: t, GroupName: g, MsgMutex: make(chan struct{}, 1)})
		})
	case "destroy_consumer_group":
		return nil, withPoints(req, func() error { return r.DestroyConsumerGroup(t, g) })
	case "exist_consumer_group":
		var ok bool
		err := withPoints(req, func() error {
			var err error
			ok, _, err = r.ExistConsumerGroup(t, g)
			return err
		})
		return ok, err
	case "produce":
		msgs := make([]server.ProducerMessage, len(req.Messages))
		for i, m := range req.Messages {
			// Milvus's ProducerMessage has a payload only (v2.6.6 server/rocksmq.go:15-17):
			// the server API has nowhere to put properties. (Milvus's own client smuggles
			// them inside the payload, client/producer_impl.go:54-66; that is client code.)
			msgs[i] = server.ProducerMessage{Payload: m.Payload}
		}
		var ids []server.UniqueID
		err := withPoints(req, func() error {
			var err error
			ids, err = r.Produce(t, msgs)
			return err
		})
		if len(ids) > 0 {
			d.ids.noteIssued(t, ids[0])
		} else if err != nil {
			// A failed produce may still have written messages (Milvus writes them before
			// the page info): recover the base from the store if this name had none.
			d.ids.ensure(t)
		}
		if err != nil {
			return nil, err
		}
		out := make([]int64, len(ids))
		for i, id := range ids {
			out[i] = d.ids.toSpec(t, id)
		}
		return out, nil
	case "consume":
		if req.N == nil {
			return nil, fail("InvalidArgument", "consume needs n")
		}
		var got []server.ConsumerMessage
		err := withPoints(req, func() error {
			var err error
			got, err = r.Consume(t, g, *req.N)
			return err
		})
		if err != nil {
			return nil, err
		}
		out := make([]wireMessage, len(got))
		for i, m := range got {
			id := d.ids.toSpec(t, m.MsgID)
			// The payload exactly as Milvus returns it: nil for an empty one
			// (server/rocksmq_impl.go:905-907), which travels as JSON null. Milvus's
			// ConsumerMessage has no properties (server/rocksmq.go:27-30): none came back,
			// shown as {} (what Milvus's own client gives a message without a header,
			// client/client_impl.go:221).
			out[i] = wireMessage{ID: &id, Payload: m.Payload, Properties: map[string]string{}}
		}
		return out, nil
	case "seek":
		if req.MsgID == nil {
			return nil, fail("InvalidArgument", "seek needs msg_id")
		}
		var mid int64
		if sid, err := req.MsgID.Int64(); err == nil {
			mid = d.ids.toMilvus(t, sid)
		} else if _, ok := new(big.Int).SetString(req.MsgID.String(), 10); ok {
			// An integer beyond int64 names no message Milvus can hold (UniqueID is int64).
			// Milvus's Seek does the same for every id it has no key for (a Get that finds
			// nothing, rocksmq_impl.go:957-970), so any id without a key stands for it:
			// math.MinInt64, never issued (Milvus's ids are positive).
			mid = math.MinInt64
		} else {
			return nil, fail("InvalidArgument", "seek: msg_id %q is not an integer", req.MsgID.String())
		}
		return nil, withPoints(req, func() error { return r.Seek(t, g, mid) })
	case "seek_to_latest":
		return nil, withPoints(req, func() error { return r.SeekToLatest(t, g) })
	case "get_latest_msg":
		var id int64
		err := withPoints(req, func() error {
			var err error
			id, err = r.GetLatestMsg(t)
			return err
		})
		if err != nil {
			return nil, err
		}
		return d.ids.toSpec(t, id), nil
	case "run_retention":
		err := withPoints(req, func() error {
			for _, e := range r.RmqsimRetentionPass() {
				// Milvus's ticker loop logs these and goes on; so does the driver.
				fmt.Fprintln(os.Stderr, "rmqsim-milvus: retention:", e)
			}
			return nil
		})
		return nil, err
	case "snapshot":
		return d.snapshot(req.Topics, req.MessagesFrom)
	case "close":
		err := withPoints(req, func() error {
			announce("close.before_flush")
			r.Close()
			announce("close.after_flush")
			return nil
		})
		return nil, err
	}
	return nil, fail("InvalidArgument", "unknown op %q", req.Op)
}

// asConsumed is a stored value as Milvus's Consume returns it: nil when empty
// (server/rocksmq_impl.go:905-910).
func asConsumed(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// classify turns a Milvus error into SPEC's kinds. Milvus reports most conditions as plain
// fmt/cockroachdb errors, so this matches their fixed message texts (rocksmq_impl.go, v2.6.6).
func classify(err error) *opError {
	msg := err.Error()
	kind := ""
	switch {
	case msg == server.RmqNotServingErrMsg:
		kind = "NotServing"
	case errors.Is(err, merr.ErrMqTopicNotFound):
		kind = "TopicNotFound"
	case strings.HasPrefix(msg, "topic name = ") && strings.HasSuffix(msg, " not exist"):
		kind = "TopicNotFound"
	case strings.HasPrefix(msg, "topic name = ") && strings.Contains(msg, ` contains "/"`):
		// retry.Unrecoverable wraps it: `topic name = a/b contains "/": unrecoverable error`
		kind = "InvalidArgument"
	case strings.HasPrefix(msg, "currentID of topicName=") && strings.HasSuffix(msg, " not exist"):
		kind = "GroupNotFound"
	case strings.HasPrefix(msg, "ConsumerGroup ") && strings.HasSuffix(msg, " not exists"):
		kind = "GroupNotFound"
	case msg == "move unknown consumer":
		kind = "GroupNotFound"
	case strings.HasPrefix(msg, "RMQ CreateConsumerGroup key already exists"):
		kind = "GroupExists"
	case msg == "messages are empty":
		kind = "InvalidArgument"
	}
	if kind != "" {
		return &opError{Kind: kind, Message: firstLine(msg)}
	}
	return &opError{Kind: "Unexpected", Type: fmt.Sprintf("%T", err), Message: firstLine(msg)}
}

// sortedGroups lists the (topic, group) pairs that have a position in Milvus.
func (d *driver) sortedGroups(keep func(string) bool) [][]any {
	var pairs [][2]string
	for p := range d.groups {
		if keep(p[0]) {
			pairs = append(pairs, p)
		}
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i][0] != pairs[j][0] {
			return pairs[i][0] < pairs[j][0]
		}
		return pairs[i][1] < pairs[j][1]
	})
	out := [][]any{}
	for _, p := range pairs {
		if pos, ok := d.rmq.RmqsimPosition(p[0], p[1]); ok {
			out = append(out, []any{p[0], p[1], d.ids.toSpec(p[0], pos)})
		}
	}
	return out
}

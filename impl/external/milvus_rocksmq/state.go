package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/tecbot/gorocksdb"

	"github.com/milvus-io/milvus/pkg/v2/mq/mqimpl/rocksmq/server"
	"github.com/milvus-io/milvus/pkg/v2/util/typeutil"
)

// The id mapping (README.md, "Ids"). Milvus's message ids are time-derived: the first id of a
// topic is (now in ms << 18) + 1, later ones count up from the highest id the package last
// allocated (in memory) or, after a restart, the highest id still in the store. SPEC's ids
// count 1, 2, 3, ... per topic name. The driver keeps, per topic name, the first Milvus id
// ever issued under it (its base) and maps
//
//	spec id = milvus id - base + 1        milvus id = spec id + base - 1
//
// so ids Milvus issues consecutively stay consecutive, and wherever Milvus restarts its count
// (a new time-derived start after a topic emptied and the process restarted) the mapped ids
// jump or repeat exactly as Milvus's do: the mapping renumbers, it does not hide anything.
// Positions and ids <= 0 are Milvus's sentinels (-1 "earliest", 0 after seek_to_latest on an
// empty topic) and pass unchanged.
//
// The bases live in <path>/rmqsim_id_base.json, written (write, fsync, rename, fsync dir)
// right after the first produce under a name returns. A crash between Milvus's write and that
// file loses nothing: every open, and every failed produce, takes the base of any name that
// has messages in the store but no base from the smallest id stored under it (no retention
// can have run in between: retention runs only as an op, after open).
const idFile = "rmqsim_id_base.json"

type idMap struct {
	path string
	d    *driver
	base map[string]int64
}

func loadIDMap(path string, d *driver) (*idMap, error) {
	m := &idMap{path: filepath.Join(path, idFile), d: d, base: map[string]int64{}}
	data, err := os.ReadFile(m.path)
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &m.base); err != nil {
			return nil, fmt.Errorf("%s: %w", m.path, err)
		}
	case !os.IsNotExist(err):
		return nil, err
	}
	changed := false
	for name, lowest := range d.storeMinimums(true, "") {
		if _, ok := m.base[name]; !ok {
			m.base[name] = lowest
			changed = true
		}
	}
	if changed {
		if err := m.save(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *idMap) save() error {
	data, err := json.Marshal(m.base)
	if err != nil {
		return err
	}
	tmp := m.path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, m.path); err != nil {
		return err
	}
	dir, err := os.Open(filepath.Dir(m.path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}

func (m *idMap) mustSave() {
	if err := m.save(); err != nil {
		fmt.Fprintln(os.Stderr, "rmqsim-milvus: cannot write the id map:", err)
		os.Exit(2)
	}
}

// noteIssued records first as name's base if the name has none.
func (m *idMap) noteIssued(name string, first int64) {
	if _, ok := m.base[name]; ok {
		return
	}
	m.base[name] = first
	m.mustSave()
}

// ensure takes name's base from the store when it has none and the store has its messages.
func (m *idMap) ensure(name string) {
	if _, ok := m.base[name]; ok {
		return
	}
	if lowest, ok := m.d.storeMinimums(false, name)[name]; ok {
		m.base[name] = lowest
		m.mustSave()
	}
}

func (m *idMap) toSpec(name string, mid int64) int64 {
	if mid <= 0 {
		return mid
	}
	m.ensure(name)
	b, ok := m.base[name]
	if !ok {
		return mid
	}
	return mid - b + 1
}

func (m *idMap) toMilvus(name string, sid int64) int64 {
	b, ok := m.base[name]
	if !ok {
		// Nothing was ever stored under the name: no id can name a message.
		return sid
	}
	return sid + b - 1
}

// splitKey splits a message key "<topic>/<decimal id>" (Milvus writes path.Join(topic, id)).
func splitKey(key string) (string, int64, bool) {
	i := strings.LastIndexByte(key, '/')
	if i < 0 {
		return "", 0, false
	}
	id, err := strconv.ParseInt(key[i+1:], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return key[:i], id, true
}

// storeMinimums scans the message store (every key when all, else the keys under only+"/")
// and returns the smallest id stored under each topic name.
func (d *driver) storeMinimums(all bool, only string) map[string]int64 {
	out := map[string]int64{}
	d.scanStore(all, only, func(name string, id int64, _ func() []byte) {
		if cur, ok := out[name]; !ok || id < cur {
			out[name] = id
		}
	})
	return out
}

// scanStore iterates the message store's keys: every key when all, else those under
// only+"/" (the prefix Milvus's Consume reads; for the names "" and "." Milvus writes keys
// without it, path.Join dropping the name, so those messages are invisible to it and here).
func (d *driver) scanStore(all bool, only string, fn func(name string, id int64, value func() []byte)) {
	db, cf := d.rmq.RmqsimStore()
	ro := gorocksdb.NewDefaultReadOptions()
	defer ro.Destroy()
	prefix := only + "/"
	if !all {
		ro.SetIterateUpperBound([]byte(typeutil.AddOne(prefix)))
	}
	it := db.NewIteratorCF(ro, cf)
	defer it.Close()
	if all {
		it.SeekToFirst()
	} else {
		it.Seek([]byte(prefix))
	}
	for ; it.Valid(); it.Next() {
		k := it.Key()
		key := string(k.Data())
		k.Free()
		if !all && !strings.HasPrefix(key, prefix) {
			break
		}
		name, id, ok := splitKey(key)
		if !ok || (!all && name != only) {
			continue
		}
		fn(name, id, func() []byte {
			v := it.Value()
			defer v.Free()
			return append([]byte{}, v.Data()...)
		})
	}
}

type page struct {
	EndID     int64  `json:"end_id"`
	SizeBytes int64  `json:"size_bytes"`
	ClosedTS  int64  `json:"closed_ts"`
	AckedTS   *int64 `json:"acked_ts"`
}

type topicState struct {
	Messages      []wireMessage `json:"messages"`
	Pages         []page        `json:"pages"`
	OpenPageBytes int64         `json:"open_page_bytes"`
	LastID        int64         `json:"last_id"`
}

// topicNames: the names with a topic record in the meta database (topic_id/<name>, what
// CreateTopic checks and a restart reloads) and those in the package's topic lock map (what
// Produce, Consume and Seek check; RegisterConsumer adds names to it too).
func (d *driver) topicNames() ([]string, error) {
	keys, _, err := d.rmq.RmqsimKV().LoadWithPrefix(context.TODO(), "topic_id/")
	if err != nil {
		return nil, err
	}
	set := map[string]struct{}{}
	for _, k := range keys {
		set[strings.TrimPrefix(k, "topic_id/")] = struct{}{}
	}
	for _, n := range server.RmqsimLockedTopics() {
		set[n] = struct{}{}
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// metaInts reads "<title><topic>/<milvus id>" keys of the meta database as end id -> int.
func (d *driver) metaInts(title, topic string) (map[int64]int64, error) {
	prefix := title + topic + "/"
	keys, vals, err := d.rmq.RmqsimKV().LoadWithPrefix(context.TODO(), prefix)
	if err != nil {
		return nil, err
	}
	out := map[int64]int64{}
	for i, k := range keys {
		rest := strings.TrimPrefix(k, prefix)
		id, err := strconv.ParseInt(rest, 10, 64)
		if err != nil {
			continue // a longer topic name sharing the prefix: "t/x/..." cannot be (no "/")
		}
		v, err := strconv.ParseInt(vals[i], 10, 64)
		if err != nil {
			v = math.MinInt64
		}
		out[id] = v
	}
	return out, nil
}

func (d *driver) topicState(name string, from *int64) (*topicState, error) {
	ts := &topicState{Messages: []wireMessage{}, Pages: []page{}}
	type stored struct {
		id      int64
		payload []byte
	}
	var msgs []stored
	var maxID int64 = -1
	d.scanStore(false, name, func(_ string, mid int64, value func() []byte) {
		if mid > maxID {
			maxID = mid
		}
		sid := d.ids.toSpec(name, mid)
		if from != nil && sid < *from {
			return
		}
		msgs = append(msgs, stored{sid, value()})
	})
	sort.Slice(msgs, func(i, j int) bool { return msgs[i].id < msgs[j].id })
	for _, m := range msgs {
		id := m.id
		ts.Messages = append(ts.Messages, wireMessage{ID: &id, Payload: asConsumed(m.payload), Properties: map[string]string{}})
	}

	sizes, err := d.metaInts("page_message_size/", name)
	if err != nil {
		return nil, err
	}
	closed, err := d.metaInts("page_ts/", name)
	if err != nil {
		return nil, err
	}
	acked, err := d.metaInts("acked_ts/", name)
	if err != nil {
		return nil, err
	}
	ends := map[int64]struct{}{}
	for _, m := range []map[int64]int64{sizes, closed, acked} {
		for id := range m {
			ends[id] = struct{}{}
		}
	}
	for end := range ends {
		// A part missing (a page record the three databases' prefixes disagree on) shows
		// as -1, so that the state differs from any well-formed one.
		p := page{EndID: d.ids.toSpec(name, end), SizeBytes: -1, ClosedTS: -1}
		if v, ok := sizes[end]; ok {
			p.SizeBytes = v
		}
		if v, ok := closed[end]; ok {
			p.ClosedTS = v
		}
		if v, ok := acked[end]; ok {
			a := v
			p.AckedTS = &a
		}
		ts.Pages = append(ts.Pages, p)
	}
	sort.Slice(ts.Pages, func(i, j int) bool { return ts.Pages[i].EndID < ts.Pages[j].EndID })

	val, err := d.rmq.RmqsimKV().Load(context.TODO(), "message_size/"+name)
	if err != nil {
		return nil, err
	}
	if val != "" {
		if n, err := strconv.ParseInt(val, 10, 64); err == nil {
			ts.OpenPageBytes = n
		} else {
			ts.OpenPageBytes = -1
		}
	}

	// last_id: read from what survives a crash (PROTOCOL.md), the highest id stored under
	// the name, which is also what Milvus's next produce builds on after a restart; 0 for
	// none. (In-process Milvus continues from the id it last allocated, a cache the driver
	// does not report.)
	if maxID < 0 {
		ts.LastID = 0
	} else {
		ts.LastID = d.ids.toSpec(name, maxID)
	}
	return ts, nil
}

func (d *driver) snapshot(only *[]string, from map[string]int64) (any, error) {
	names, err := d.topicNames()
	if err != nil {
		return nil, err
	}
	want := func(string) bool { return true }
	if only != nil {
		set := map[string]struct{}{}
		for _, n := range *only {
			set[n] = struct{}{}
		}
		want = func(n string) bool { _, ok := set[n]; return ok }
	}
	topics := map[string]*topicState{}
	for _, n := range names {
		if !want(n) {
			continue
		}
		var f *int64
		if v, ok := from[n]; ok {
			f = &v
		}
		ts, err := d.topicState(n, f)
		if err != nil {
			return nil, err
		}
		topics[n] = ts
	}
	return map[string]any{"topics": topics, "groups": d.sortedGroups(want)}, nil
}

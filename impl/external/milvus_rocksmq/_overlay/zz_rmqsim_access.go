// A file ADDED to Milvus's package
// github.com/milvus-io/milvus/pkg/v2/mq/mqimpl/rocksmq/server at build time, through
// `go build -overlay` (scripts/build-milvus.sh writes the overlay map). Milvus's own files are
// not edited: this file only reads what the package keeps unexported (positions, the cached
// last id, the database handles, the topic lock map) and runs its unexported retention pass.
// It lives in a directory whose name starts with "_", so the Go tool never builds it as part
// of the driver's own module.

package server

import (
	"sort"
	"time"

	"github.com/tecbot/gorocksdb"

	rocksdbkv "github.com/milvus-io/milvus/pkg/v2/kv/rocksdb"
)

// RmqsimQueue names the unexported queue type for the driver.
type RmqsimQueue = rocksmq

// RmqsimKV is the queue's meta database (pages, page timestamps, acks, topic records).
func (rmq *rocksmq) RmqsimKV() *rocksdbkv.RocksdbKV { return rmq.kv.(*rocksdbkv.RocksdbKV) }

// RmqsimStore is the message database and its default column family (the messages).
func (rmq *rocksmq) RmqsimStore() (*gorocksdb.DB, *gorocksdb.ColumnFamilyHandle) {
	return rmq.store, rmq.cfh[0]
}

// RmqsimPosition is a group's position as the package keeps it (consumersID, memory only).
func (rmq *rocksmq) RmqsimPosition(topic, group string) (int64, bool) {
	return rmq.getCurrentID(topic, group)
}

// RmqsimCachedLatest is the last id the package allocated for a topic in this process
// (topicName2LatestMsgID), the value its next Produce builds on, when it holds one.
func (rmq *rocksmq) RmqsimCachedLatest(topic string) (int64, bool) {
	v, ok := rmq.topicName2LatestMsgID.Load(topic)
	if !ok {
		return 0, false
	}
	return v.(int64), true
}

// RmqsimLockedTopics lists the names in the package's topic lock map (topicMu): the names
// Produce, Consume, Seek and DestroyTopic treat as existing topics.
func RmqsimLockedTopics() []string {
	var names []string
	topicMu.Range(func(k, _ interface{}) bool {
		names = append(names, k.(string))
		return true
	})
	sort.Strings(names)
	return names
}

// RmqsimRetentionPass runs the package's retention pass (expiredCleanUp) once over every
// topic it tracks, in name order, under the retention lock, as the body of its ticker loop
// does, without the loop's per-topic "last run + retention/10" gate. Nothing runs when the
// package would not have started its retention goroutine (both limits -1). Errors are
// returned, where the ticker loop only logs them.
func (rmq *rocksmq) RmqsimRetentionPass() []error {
	if !checkRetention() {
		return nil
	}
	ri := rmq.retentionInfo
	ri.mutex.RLock()
	defer ri.mutex.RUnlock()
	var topics []string
	ri.topicRetetionTime.Range(func(topic string, _ int64) bool {
		topics = append(topics, topic)
		return true
	})
	sort.Strings(topics)
	var errs []error
	for _, topic := range topics {
		if err := ri.expiredCleanUp(topic); err != nil {
			errs = append(errs, err)
		}
		ri.topicRetetionTime.Insert(topic, time.Now().Unix())
	}
	return errs
}

// RmqsimMsgSizeExpiredCheck is the package's size test of retention, exposed so that the
// driver can translate a byte limit that is not a whole number of MiB (the parameter
// rocksmq.retentionSizeInMB is in whole MiB): the driver then patches this function at run
// time to the same comparison in bytes (README.md, "What is reached how", configuration).
var RmqsimMsgSizeExpiredCheck = msgSizeExpiredCheck

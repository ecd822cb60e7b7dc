package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkOutboxRoundTrip is one row through the stream: appended, handed to a consumer
// waiting in WaitOutbox (woken by the append), acked. Its ns/op is the stream's own
// latency from a row written to a row acknowledged.
func BenchmarkOutboxRoundTrip(b *testing.B) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "arizuko.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := LeasePolicy{Visibility: time.Minute, MaxAttempts: 5}
	got := make(chan OutboxLease)
	go func() {
		for {
			l, err := s.WaitOutbox(ctx, OutboxFilter{}, p, time.Minute)
			if err != nil {
				close(got)
				return
			}
			got <- l
		}
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.AppendOutbox(ctx, OutboxItem{Folder: "main", Kind: OutboxReply, Target: "tg:1", Content: "hello"}); err != nil {
			b.Fatal(err)
		}
		l := <-got
		for len(l.Items) == 0 {
			l = <-got
		}
		if _, err := s.AckOutbox(ctx, l.Token, []int64{l.Items[0].ID}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkOutboxLeaseAck100 leases and acks a backlog in batches of 100, as a gateway
// catching up does; rows/s is its drain rate.
func BenchmarkOutboxLeaseAck100(b *testing.B) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "arizuko.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for i := 0; i < b.N*100; i++ {
		if _, err := s.AppendOutbox(ctx, OutboxItem{Folder: "main", Kind: OutboxReply, Target: "tg:" + string(rune('a'+i%20)), Content: "hello"}); err != nil {
			b.Fatal(err)
		}
	}
	p := LeasePolicy{Visibility: time.Minute, MaxAttempts: 5}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := s.LeaseOutbox(ctx, OutboxFilter{Limit: 100}, p)
		if err != nil || len(l.Items) != 100 {
			b.Fatalf("lease: %d rows, %v", len(l.Items), err)
		}
		ids := make([]int64, len(l.Items))
		for j, it := range l.Items {
			ids[j] = it.ID
		}
		if _, err := s.AckOutbox(ctx, l.Token, ids); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "rows/s")
}

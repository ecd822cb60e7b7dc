package store

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestOutbox(t *testing.T) {
	c := newClock()
	s := openTest(t, WithClock(c.Now))
	ctx := context.Background()
	r := mustCreateRun(t, s, Run{Folder: "main"})
	items := []OutboxItem{
		{Folder: "main", RunID: r.ID, Kind: OutboxMessage, Target: "tg:1", Content: "hello"},
		{Folder: "main", Kind: OutboxReply, Target: "tg:1", Content: "re"},
		{Folder: "other", Kind: OutboxMessage, Content: "elsewhere"},
		{Folder: "main", RunID: r.ID, Kind: OutboxDocument, Target: "tg:1", DocPath: "/workspace/out.pdf", DocName: "out.pdf"},
	}
	var ids []int64
	for _, it := range items {
		got, err := s.AppendOutbox(ctx, it)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID == 0 || got.CreatedAt != c.MS() {
			t.Errorf("appended %+v", got)
		}
		ids = append(ids, got.ID)
	}
	all, err := s.ListOutbox(ctx, "main", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[0].Content != "hello" || all[0].RunID != r.ID || all[1].RunID != "" || all[2].DocName != "out.pdf" {
		t.Errorf("ListOutbox = %+v", all)
	}
	since, _ := s.ListOutbox(ctx, "main", ids[0], 1)
	if len(since) != 1 || since[0].ID != ids[1] {
		t.Errorf("since first, limit 1: %+v", since)
	}

	bad := []struct {
		name  string
		it    OutboxItem
		err   error
		field string
	}{
		{"no folder", OutboxItem{Kind: OutboxMessage}, ErrInvalid, "folder"},
		{"bad kind", OutboxItem{Folder: "main", Kind: "sms"}, ErrInvalid, "kind"},
		{"document without path", OutboxItem{Folder: "main", Kind: OutboxDocument}, ErrInvalid, "doc path"},
		{"message with path", OutboxItem{Folder: "main", Kind: OutboxMessage, DocPath: "/x"}, ErrInvalid, "doc path"},
		{"unknown run", OutboxItem{Folder: "main", Kind: OutboxMessage, RunID: "r_none"}, ErrNotFound, "r_none"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.AppendOutbox(ctx, tt.it)
			if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("err = %v, want %v naming %s", err, tt.err, tt.field)
			}
		})
	}
}

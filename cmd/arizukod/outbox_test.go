package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/arizuko/arizukod/store"
)

// TestOutboxShowTimes: `outbox show` prints a row's times as the list does, in RFC 3339,
// not in unix milliseconds, and leaves out the times a row does not have.
func TestOutboxShowTimes(t *testing.T) {
	fx := newCLIFixture(t)
	it, err := fx.st.AppendOutbox(context.Background(), store.OutboxItem{Folder: "main", Kind: store.OutboxMessage, Target: "tg:1", Content: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := fx.run(t, "outbox", "show", fmt.Sprint(it.ID), "--socket="+fx.socket)
	var row map[string]any
	if err := json.Unmarshal([]byte(stdout), &row); code != 0 || err != nil {
		t.Fatalf("outbox show: exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	created, ok := row["createdAt"].(string)
	if at, err := time.Parse(time.RFC3339Nano, created); !ok || err != nil || at.UnixMilli() != it.CreatedAt {
		t.Errorf("createdAt %v, want %d in RFC 3339", row["createdAt"], it.CreatedAt)
	}
	for _, absent := range []string{"leaseUntil", "deliveredAt"} {
		if v, ok := row[absent]; ok {
			t.Errorf("%s = %v, want it left out: the row was neither leased nor delivered", absent, v)
		}
	}
}

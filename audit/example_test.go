package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/babelagent/babel/audit"
)

func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "audit-example")
	defer os.RemoveAll(dir)
	logPath := filepath.Join(dir, "data", "audit.db")
	keyPath := filepath.Join(dir, "keys", "audit.key") // never beside the log

	w, err := audit.Open(ctx, logPath, &audit.Options{KeyPath: keyPath})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Write-ahead: the intent is durable before the action runs.
	intent := &audit.Record{
		Kind: audit.KindNodeIntent, RunID: "run-1", RootRunID: "run-1",
		Principal: "alice", Agent: "ticket-bot", Node: "post", Adapter: "http",
		Args: json.RawMessage(`{"url": "https://tickets.example.com/api/reply", "id": 7}`),
	}
	if _, err := w.Append(ctx, intent); err != nil {
		fmt.Println("not running the action:", err)
		return
	}
	fmt.Println(string(intent.Args))
	// ... the action runs here ...
	outcome := &audit.Record{Kind: audit.KindNodeOutcome, RunID: "run-1", RootRunID: "run-1", Node: "post", Status: "succeeded"}
	if _, err := w.Append(ctx, outcome); err != nil {
		fmt.Println(err)
	}
	w.Close()

	pub, _ := audit.LoadPublicKey(audit.PublicKeyFile(keyPath))
	rep, err := audit.Verify(ctx, logPath, pub)
	fmt.Println(rep.Records, err)
	trajectory, _ := audit.Replay(ctx, logPath, "run-1")
	for _, r := range trajectory {
		fmt.Println(r.Seq, r.Kind, r.Node)
	}
	// Output:
	// {"id":7,"url":"https://tickets.example.com/api/reply"}
	// 2 <nil>
	// 1 node.intent post
	// 2 node.outcome post
}

package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/dfs-project/dfs/internal/client"
)

const keysHelp = `usage: dfs keys create [flags] NAME
       dfs keys ls [flags]
       dfs keys rm [flags] ACCESS_KEY

Manages the access keys of the S3 API and the REST API (admin only: run it
with the root key in DFS_ACCESS_KEY and DFS_SECRET_KEY, unless the REST API
is open). create prints the new key's secret, which is never shown again.
`

func runKeys(ctx context.Context, args []string, s stdio) int {
	if len(args) == 0 {
		return badUsage(s, "keys", "missing subcommand: create, ls or rm")
	}
	switch args[0] {
	case "create":
		return keysCreate(ctx, args[1:], s)
	case "ls":
		return keysList(ctx, args[1:], s)
	case "rm":
		return keysRemove(ctx, args[1:], s)
	case "-h", "-help", "--help":
		fmt.Fprint(s.out, keysHelp)
		return exitOK
	}
	return badUsage(s, "keys", "unknown subcommand %q: create, ls or rm", args[0])
}

func keysCreate(ctx context.Context, args []string, s stdio) int {
	cc := newClientCmd("keys create", keysHelp, s)
	ak := cc.fs.String("access-key", "", "the access key id (generated when empty)")
	sk := cc.fs.String("secret-key", "", "the secret (generated when empty)")
	admin := cc.fs.Bool("admin", false, "an admin key: may use /api/admin/* and every bucket")
	pos, code, done := cc.parse(args, 1, 1)
	if done {
		return code
	}
	k, err := cc.c.CreateKey(ctx, client.NewKey{Name: pos[0], AccessKey: *ak, SecretKey: *sk, Admin: *admin})
	if err != nil {
		return cc.fail(err)
	}
	if cc.json {
		cc.printJSON(k)
		return exitOK
	}
	fmt.Fprintf(s.out, "access key  %s\nsecret key  %s\n(the secret is not shown again)\n", k.AccessKey, k.SecretKey)
	return exitOK
}

func keysList(ctx context.Context, args []string, s stdio) int {
	cc := newClientCmd("keys ls", keysHelp, s)
	if _, code, done := cc.parse(args, 0, 0); done {
		return code
	}
	keys, err := cc.c.Keys(ctx)
	if err != nil {
		return cc.fail(err)
	}
	if cc.json {
		cc.printJSON(keys)
		return exitOK
	}
	tw := tabwriter.NewWriter(s.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCESS KEY\tNAME\tADMIN\tCREATED")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\n", k.AccessKey, k.Name, k.Admin, localTime(k.CreatedAt))
	}
	tw.Flush()
	return exitOK
}

func keysRemove(ctx context.Context, args []string, s stdio) int {
	cc := newClientCmd("keys rm", keysHelp, s)
	pos, code, done := cc.parse(args, 1, 1)
	if done {
		return code
	}
	if err := cc.c.DeleteKey(ctx, pos[0]); err != nil {
		return cc.fail(err)
	}
	fmt.Fprintf(s.out, "access key %s revoked\n", pos[0])
	return exitOK
}

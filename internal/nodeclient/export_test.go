package nodeclient

// Queued is the number of small Puts waiting in node's batcher.
func (c *Client) Queued(node string) int {
	b := c.batcher(node)
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

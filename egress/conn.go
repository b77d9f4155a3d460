package egress

import "net"

// countingConn counts the bytes of a connection into its client.
type countingConn struct {
	net.Conn
	c *Client
}

func (c *Client) count(conn net.Conn) net.Conn {
	return &countingConn{Conn: conn, c: c}
}

func (cc *countingConn) Read(p []byte) (int, error) {
	n, err := cc.Conn.Read(p)
	if n > 0 {
		cc.c.recvd.Add(int64(n))
		if cc.c.onBytes != nil {
			cc.c.onBytes(int64(n))
		}
	}
	return n, err
}

func (cc *countingConn) Write(p []byte) (int, error) {
	n, err := cc.Conn.Write(p)
	if n > 0 {
		cc.c.sent.Add(int64(n))
		if cc.c.onBytes != nil {
			cc.c.onBytes(int64(n))
		}
	}
	return n, err
}

// CloseWrite half-closes when the underlying connection can (a CONNECT
// proxy relaying a client's EOF needs it).
func (cc *countingConn) CloseWrite() error {
	if cw, ok := cc.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return cc.Conn.Close()
}

// CloseRead half-closes the read side when the underlying connection can.
func (cc *countingConn) CloseRead() error {
	if cr, ok := cc.Conn.(interface{ CloseRead() error }); ok {
		return cr.CloseRead()
	}
	return nil
}

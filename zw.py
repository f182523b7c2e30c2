import socket, struct, time, sys
from hpack import Encoder
def frame(t, flags, sid, payload): return struct.pack(">I", len(payload))[1:] + bytes([t, flags]) + struct.pack(">I", sid) + payload
s=socket.create_connection(("127.0.0.1",int(sys.argv[1]))); s.settimeout(10)
settings=struct.pack(">HI",4,0)  # INITIAL_WINDOW_SIZE 0
e=Encoder()
s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"+frame(4,0,0,settings)+frame(1,5,1,e.encode([(":method","GET"),(":scheme","http"),(":path","/100k.bin"),(":authority","localhost")])))
t0=time.time(); buf=b""
while True:
    try: d=s.recv(65536)
    except Exception as ex: print("exc", ex); break
    if not d: break
    buf+=d
i=0
while i+9<=len(buf):
    l=int.from_bytes(buf[i:i+3],'big'); t=buf[i+3]
    if t==7: print("GOAWAY code", int.from_bytes(buf[i+9+4:i+9+8],'big'))
    if t==0: print("DATA", l)
    i+=9+l
print("closed after %.1fs"%(time.time()-t0))

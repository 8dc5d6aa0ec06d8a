//! How traffic reaches pods on other nodes, in Cilium's words: `routing-mode` (`native` or
//! `tunnel`), and in tunnel mode `tunnel-protocol` and `tunnel-port`. Pure values and their
//! parsing; the tunnel device and the encapsulation are the datapath's (`datapath::tunnel`).

use std::fmt;

/// `routing-mode`: how pods on other nodes are reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RoutingMode {
    /// Routed by the network (or `auto-direct-node-routes`); weft's default.
    #[default]
    Native,
    /// Encapsulated towards the node of the destination (Cilium's default).
    Tunnel,
}

impl RoutingMode {
    /// The value as cilium-config spells it.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::Tunnel => "tunnel",
        }
    }
}

impl fmt::Display for RoutingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `tunnel-protocol`: the encapsulation in tunnel mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TunnelProtocol {
    /// VXLAN (Cilium's default), UDP port 8472 unless `tunnel-port` says otherwise.
    #[default]
    Vxlan,
    /// Geneve, UDP port 6081: parsed so that it can be refused with the reason.
    Geneve,
}

impl TunnelProtocol {
    /// The value as cilium-config spells it.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Vxlan => "vxlan",
            Self::Geneve => "geneve",
        }
    }

    /// The UDP port when `tunnel-port` is 0 (Cilium's and the kernel's defaults).
    #[must_use]
    pub const fn default_port(self) -> u16 {
        match self {
            Self::Vxlan => 8472,
            Self::Geneve => 6081,
        }
    }
}

impl fmt::Display for TunnelProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why `tunnel-protocol: geneve` is refused at start.
pub const GENEVE_REFUSED: &str = "vxlan: weft does not run geneve, because the kernels it is \
     tested on have no geneve module (`ip link add … type geneve` answers \"Unknown device \
     type\"), so that datapath cannot be tested";

/// The tunnel settings in force.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TunnelConfig {
    /// `tunnel-protocol` (default vxlan).
    pub protocol: TunnelProtocol,
    /// `tunnel-port` (default 0: the protocol's port).
    pub port: u16,
}

impl TunnelConfig {
    /// The UDP port the tunnel uses: `tunnel-port`, or the protocol's default when 0.
    #[must_use]
    pub const fn udp_port(self) -> u16 {
        if self.port == 0 {
            self.protocol.default_port()
        } else {
            self.port
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_follows_the_protocol_unless_given() {
        let vxlan = TunnelConfig::default();
        assert_eq!(vxlan.udp_port(), 8472);
        let geneve = TunnelConfig {
            protocol: TunnelProtocol::Geneve,
            port: 0,
        };
        assert_eq!(geneve.udp_port(), 6081);
        let given = TunnelConfig {
            port: 4789,
            ..vxlan
        };
        assert_eq!(given.udp_port(), 4789);
    }
}

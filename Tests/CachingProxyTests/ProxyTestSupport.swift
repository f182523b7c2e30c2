import CachingProxy
import Testing
